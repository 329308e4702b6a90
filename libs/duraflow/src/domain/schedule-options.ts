/**
 * What a schedule may miss: ticks that fell due while no node ran it (every node down, or
 * stalled past later ticks). `'latest'` starts one task for the most recent of them, `'all'`
 * one per missed tick (the newest `maxCatchUp`, oldest first), `'none'` starts none.
 */
export type ScheduleCatchUp = 'latest' | 'all' | 'none';

export const SCHEDULE_CATCH_UP_POLICIES: readonly ScheduleCatchUp[] = ['latest', 'all', 'none'];

/** Schedule names: they go into `schedule:<name>:<tick ISO>` idempotency keys of at most 255 characters. */
export const SCHEDULE_NAME_PATTERN = /^[A-Za-z0-9_-]{1,200}$/;
export const DEFAULT_MAX_CATCH_UP = 100;
/** The most `maxCatchUp` may be: the schedule store keeps as many tick rows per schedule (see ScheduleStore). */
export const MAX_CATCH_UP = 1000;

/** A workflow's own schedule: `@Workflow(name, { schedule })` or `workflow(name, fn, { schedule })`; named after the workflow. */
export interface WorkflowScheduleOptions {
  /**
   * When it ticks: a cron expression of 5 fields (minute precision) or 6 (a leading seconds
   * field), e.g. `'0 2 * * *'` (02:00 every day) or `'*\/10 * * * * *'` (every 10 s).
   */
  cron: string;
  /** IANA time zone the cron is read in, e.g. `'Europe/Amsterdam'`. Default `'UTC'`. */
  timezone?: string;
  /** The input of every task it starts, checked at boot like a submit's (the workflow's DTO). Default `{}`. */
  input?: unknown;
  /** Ticks missed while no node ran the schedule. Default `'latest'`. */
  catchUp?: ScheduleCatchUp;
  /** With `catchUp: 'all'`, the most missed ticks started (the newest ones); older ones are skipped. 1 to 1000, default 100. */
  maxCatchUp?: number;
}

/** A schedule in `DuraflowModule.forRoot({ schedules })`: any registered workflow, under a name of its own. */
export interface ScheduleDefinition extends WorkflowScheduleOptions {
  /** Unique among the application's schedules: 1 to 200 letters, digits, `-` or `_`. */
  name: string;
  /** The workflow each tick submits. */
  workflow: string;
}

/** One schedule as `WorkflowService.listSchedules()` shows it. */
export interface ScheduleInfo {
  name: string;
  workflow: string;
  cron: string;
  timezone: string;
  catchUp: ScheduleCatchUp;
  maxCatchUp: number;
  /** The next time it ticks after now (null when the cron has no future time). */
  nextTickAt: Date | null;
  /** The newest tick done by any node (a task started, or skipped by the catch-up policy); null before the first. */
  lastTickAt: Date | null;
  /** The task of the newest tick that started one, with its status now (null if the task was deleted); null when none did yet. */
  lastTask: { id: string; status: string | null; tickAt: Date } | null;
  /** Since when it is paused (pauseSchedule: no node starts its ticks); null while it runs. */
  pausedAt: Date | null;
}
