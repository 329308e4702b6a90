/** Query parameters of a link; empty ones are left out. */
export type LinkQuery = Record<string, string | number | boolean | null | undefined>;

/** A stored JSON value of a task or a step. */
export type StepValueKind = 'input' | 'output' | 'error';
export type DeadLetterAction = 'retry' | 'discard';
/** What the task list's bulk actions do to the tasks its filters match. */
export type BulkAction = 'cancel' | 'retry' | 'resume';
/** What the workflow page's buttons do to a schedule. */
export type ScheduleAction = 'pause' | 'resume' | 'trigger';

/**
 * Every URL of the dashboard, from the path it is mounted at as this request reached it (so a
 * global prefix or a RouterModule nesting is in it). Path segments are encoded here, once.
 */
export class DashboardLinks {
  constructor(readonly mount: string) {}

  home(query: LinkQuery = {}): string {
    return this.to('', query);
  }

  task(id: string, query: LinkQuery = {}): string {
    return this.to(`tasks/${seg(id)}`, query);
  }

  /** The live part of a task's page, as an HTML fragment (`signals`: the cursor of the page of signals shown). */
  taskLive(id: string, query: LinkQuery = {}): string {
    return this.to(`tasks/${seg(id)}/live`, query);
  }

  /** The task's server-sent events. */
  taskEvents(id: string): string {
    return this.to(`tasks/${seg(id)}/events`);
  }

  /** The task's whole input, output or error, as JSON. */
  taskValue(id: string, kind: StepValueKind): string {
    return this.to(`tasks/${seg(id)}/values/${kind}`);
  }

  /** A step's whole input, output or error, as JSON. */
  stepValue(id: string, stepKey: string, kind: StepValueKind): string {
    return this.to(`tasks/${seg(id)}/steps/${seg(stepKey)}/${kind}`);
  }

  cancel(id: string, compensate: boolean): string {
    return this.to(`tasks/${seg(id)}/cancel`, { compensate: compensate ? 'true' : undefined });
  }

  /** The form that sends a signal to the task (GET), and where it posts (POST). */
  signal(id: string): string {
    return this.to(`tasks/${seg(id)}/signal`);
  }

  /** The confirmation of a held task's resume (GET), and where it posts (POST). */
  resume(id: string): string {
    return this.to(`tasks/${seg(id)}/resume`);
  }

  /** The confirmation of a task's retry (GET), and where it posts (POST). */
  retry(id: string): string {
    return this.to(`tasks/${seg(id)}/retry`);
  }

  /** The confirmation of a fork of the task from step `fromStep` (GET), and where it posts (POST). */
  fork(id: string, fromStep: string): string {
    return this.to(`tasks/${seg(id)}/fork`, { step: fromStep });
  }

  /** The confirmation of a bulk action on the tasks a list's filters match (GET, with its dry run), and where it posts. */
  bulk(action: BulkAction, query: LinkQuery = {}): string {
    return this.to(`bulk/${action}`, query);
  }

  deadLetter(taskId: string, deadLetterId: string, action: DeadLetterAction): string {
    return this.to(`tasks/${seg(taskId)}/dead-letters/${seg(deadLetterId)}/${action}`);
  }

  deadLetters(query: LinkQuery = {}): string {
    return this.to('dead-letters', query);
  }

  /** The recent published events (`name`: of one name) and the open debounces and batches. */
  events(query: LinkQuery = {}): string {
    return this.to('events', query);
  }

  /** The overview's charts (`window`: hour, day or week). */
  overview(query: LinkQuery = {}): string {
    return this.to('overview', query);
  }

  /** The page of one registered workflow. */
  workflow(name: string): string {
    return this.to(`workflows/${seg(name)}`);
  }

  /** The confirmation of an action on a schedule (GET), and where it posts (POST). */
  schedule(workflow: string, schedule: string, action: ScheduleAction): string {
    return this.to(`workflows/${seg(workflow)}/schedules/${seg(schedule)}/${action}`);
  }

  asset(name: string): string {
    return this.to(`assets/${seg(name)}`);
  }

  private to(path: string, query: LinkQuery = {}): string {
    const search = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) {
      if (value !== undefined && value !== null && value !== '' && value !== false) search.set(key, String(value));
    }
    const text = search.toString();
    return `${this.mount}${path ? `/${path}` : ''}${text ? `?${text}` : ''}`;
  }
}

function seg(value: string): string {
  return encodeURIComponent(value);
}
