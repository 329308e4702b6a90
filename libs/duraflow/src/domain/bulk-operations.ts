import { TaskStatus } from './task-status';

/**
 * Which tasks a bulk operation (`cancelMany`, `retryMany`, `resumeMany`) acts on: every condition
 * given must hold. At least one condition, or `all: true`: an empty filter is refused, so a bulk
 * cancel of every task is never one typo away.
 */
export interface BulkTaskFilter {
  /**
   * The workflow's name, as stored on its tasks. A name this application does not register is
   * accepted: it may still match tasks of a workflow since removed from the code.
   */
  workflow?: string;
  /** The workflow's version (tasks of a workflow that declares none are version 1). */
  version?: number;
  /**
   * One status or several. Left out: every status the operation applies to. A status the
   * operation never changes (cancelMany of `completed` tasks) is refused.
   */
  status?: TaskStatus | `${TaskStatus}` | Array<TaskStatus | `${TaskStatus}`>;
  /** Only tasks created at or after this time (a Date or an ISO-8601 string). */
  createdAfter?: Date | string;
  /** Only tasks created before this time. */
  createdBefore?: Date | string;
  /** Only tasks holding every one of these tags (an AND of the pairs). */
  tags?: Record<string, string>;
  /** Every task the operation applies to, with no other condition needed. */
  all?: boolean;
}

/** How a bulk operation runs. */
export interface BulkOptions {
  /** Change at most this many tasks (a whole number from 1). Default: every task that matches. */
  limit?: number;
  /** Only count the tasks that match (`matched`, at most `limit`); write nothing (`changed` is 0). */
  dryRun?: boolean;
}

/** `cancelMany`'s options. */
export interface BulkCancelOptions extends BulkOptions {
  /**
   * Also undo each task's completed steps, as `cancel(id, { compensate: true })` does, in this
   * process (which must register the workflows of the tasks it undoes).
   */
  compensate?: boolean;
}

/** What a bulk operation did. */
export interface BulkResult {
  /** Tasks the filter matched in a status the operation applies to, as the walk met them. */
  matched: number;
  /** Tasks this call changed (each at most once); matched tasks another actor moved first are not among them. */
  changed: number;
}

/** A bulk filter once checked (internal): the statuses are those the operation applies to, never empty. */
export interface BulkSelection {
  workflow?: string;
  version?: number;
  statuses: TaskStatus[];
  createdAfter?: Date;
  createdBefore?: Date;
  /** Only tasks holding every one of these tags. */
  tags?: Record<string, string>;
}
