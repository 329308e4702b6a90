import { Injectable } from '@nestjs/common';

/** One workflow's subscriptions as this process declares them (checked at boot by EventSubscriptionExplorer). */
export interface RegisteredSubscription {
  workflowName: string;
  /** The event names it starts on. */
  events: string[];
  mode: 'each' | 'debounce' | 'batch';
  /** The debounce's or batch's key computed in TypeScript; undefined for a field key or none. */
  keyOf?: (payload: unknown) => string;
  /** The payload field the key is read from (both publishes can); null for a function key or none. */
  keyField: string | null;
  periodMs: number | null;
  maxWaitMs: number | null;
  maxSize: number | null;
  timeoutMs: number | null;
  /** What a task started without the workflow's code gets: its newest declared version and its default max retries. */
  workflowVersion: number | null;
  maxRetries: number;
}

/** The subscriptions of the workflows this process registers, by workflow name. */
@Injectable()
export class EventSubscriptionRegistry {
  private readonly byWorkflow = new Map<string, RegisteredSubscription>();

  register(subscription: RegisteredSubscription): void {
    this.byWorkflow.set(subscription.workflowName, subscription);
  }

  get(workflowName: string): RegisteredSubscription | undefined {
    return this.byWorkflow.get(workflowName);
  }

  all(): RegisteredSubscription[] {
    return [...this.byWorkflow.values()];
  }

  /** The workflows with a debounce or a batch: the ones this process's group closer starts. */
  grouped(): string[] {
    return this.all()
      .filter((s) => s.mode !== 'each')
      .map((s) => s.workflowName);
  }
}
