/**
 * Events that start workflows (docs/events.md): what a workflow subscribes with, what a publish
 * returns, and what the readers list. The rules live in events/ and in the SQL of migration 4000.
 */

/** Event names: letters, digits, `_`, `.`, `:`, `-`; 1 to 255 characters. */
export const EVENT_NAME_PATTERN = /^[A-Za-z0-9_.:-]{1,255}$/;

/** The prefix of Duraflow's own events; a caller may subscribe to them but never publish one. */
export const OWN_EVENT_PREFIX = 'duraflow.';

/** Duraflow's own events: a task reaching a terminal status, and a dead letter written. */
export const OWN_EVENT_NAMES: readonly string[] = [
  'duraflow.task.completed',
  'duraflow.task.failed',
  'duraflow.task.rolled_back',
  'duraflow.task.partial_rollback',
  'duraflow.task.cancelled',
  'duraflow.dead_letter.created',
];

/**
 * The key of a debounce or a batch: a function of the payload (run in TypeScript at publish time,
 * so a publish from SQL to that workflow is recorded as refused), or the name of a top-level
 * payload field (read by both the TypeScript and the SQL publish; a missing field is the key '').
 */
export type EventGroupKey = string | ((payload: any) => string);

export interface DebounceOptions {
  /** Events of one key share one quiet period. */
  key: EventGroupKey;
  /** The task starts once the key has had no event for this long (ms, at least 1). */
  periodMs: number;
  /** ... or this long after the period's first event, however busy the key (ms, at least periodMs). Default: no limit. */
  maxWaitMs?: number;
}

export interface BatchOptions {
  /** A batch starts its task when it holds this many events (1 to 10,000). */
  maxSize: number;
  /** ... or this long after its first event (ms, at least 1). */
  timeoutMs: number;
  /** One batch per key at a time. Default: one batch for all events. */
  key?: EventGroupKey;
}

/** A workflow's subscriptions: `@Workflow(name, { on, debounce?, batch? })`. */
export interface WorkflowEventOptions {
  /** The event name(s) that start this workflow: one task per event, the payload as input (checked by the `input` DTO). */
  on?: string | string[];
  /** Instead of one task per event: one per quiet period of a key, with the last payload. */
  debounce?: DebounceOptions;
  /** Instead of one task per event: one per batch, input `{ events: [{ id, name, payload, publishedAt }] }`. */
  batch?: BatchOptions;
}

/** Why an event started no task for a workflow: the workflow's checks refused the payload, or SQL could not compute its key. */
export interface EventRefusal {
  code: string;
  message: string;
}

/** What a publish did for one subscribing workflow. */
export interface EventDelivery {
  workflowName: string;
  /** The task it started (one per event), or, for a debounce or batch, the task its group started once closed. */
  taskId: string | null;
  /** The debounce or batch the event joined. */
  groupId: string | null;
  refusal: EventRefusal | null;
}

/** What `workflows.publish` resolves with. */
export interface PublishResult {
  eventId: string;
  /** False when an earlier publish with the same name and idempotency key recorded the event (nothing written now). */
  created: boolean;
  /** One per subscribing workflow (an earlier publish's when `created` is false). */
  deliveries: EventDelivery[];
}

/** A published event as the readers list it. */
export interface PublishedEventInfo {
  id: string;
  name: string;
  payload: unknown;
  idempotencyKey: string | null;
  publishedAt: Date;
  deliveries: EventDelivery[];
}

/** A debounce or batch that has not started its task yet. */
export interface OpenEventGroup {
  id: string;
  workflowName: string;
  mode: 'debounce' | 'batch';
  key: string;
  eventCount: number;
  openedAt: Date;
  dueAt: Date;
  /** True once no more events join it (a full batch, or a period over): the next closer starts it. */
  sealed: boolean;
}
