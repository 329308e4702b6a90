/**
 * Flow control of a workflow's tasks, enforced in the claim across every worker process
 * (docs/flow-control.md). Every worker that registers the workflow must declare the same limits.
 */
export interface FlowControlOptions<TInput = any> {
  /** At most this many running tasks of the workflow across all worker processes (a whole number >= 1). */
  concurrency?: number;
  /**
   * The key a task's limits and fairness are counted by (a tenant, an account, a resource):
   * computed once at submit from the input as stored, and kept on the task. A non-empty string of
   * at most 255 characters; anything else (or a throw) fails the submit with InvalidConcurrencyKeyError.
   */
  concurrencyKey?: (input: TInput) => string;
  /** At most this many running tasks per concurrency key (needs `concurrencyKey`). */
  keyConcurrency?: number;
  /** At most `limit` task starts in any window of `periodMs`, for the workflow or (`perKey`, needs `concurrencyKey`) per key. */
  rateLimit?: RateLimitOptions;
}

export interface RateLimitOptions {
  /** Starts allowed per window (a whole number >= 1). */
  limit: number;
  /** The sliding window, in ms (a whole number >= 1). */
  periodMs: number;
  /** Count starts per concurrency key instead of for the whole workflow. Default false. */
  perKey?: boolean;
}

/** Which limit a `FlowLimitStats` entry describes. */
export type FlowLimitKind = 'concurrency' | 'keyConcurrency' | 'rateLimit';

/** What waits on one limit now (`worker.stats().limits`, `duraflow status`). */
export interface FlowLimitStats {
  workflow: string;
  /** The concurrency key, for a per-key limit. */
  key?: string;
  kind: FlowLimitKind;
  /** Running tasks counted by the limit; for a rate limit, the starts in the current window. */
  running: number;
  limit: number;
  /** Runnable pending tasks behind the limit (of the key, for a per-key limit). */
  waiting: number;
}
