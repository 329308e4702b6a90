import { TaskStatus } from './task-status';

export interface ReapResult {
  /** Stale tasks put back to `pending` to run again (one more retry counted); a rollback in progress resumes. */
  requeued: string[];
  /** Stale tasks that had used up `max_retries` and have steps to undo: back to `pending` for their rollback. */
  rollingBack: string[];
  /** Stale tasks that had used up `max_retries` with nothing to undo: `failed` (MAX_RETRIES_EXCEEDED). */
  failed: string[];
  /** Every task this pass finished, with the status it was left in (`failed`, or a rollback's final status). */
  ended: Array<{ id: string; status: TaskStatus }>;
}
