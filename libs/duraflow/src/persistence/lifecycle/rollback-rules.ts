/**
 * The saga's rules as SQL fragments, each written once for every statement that applies it:
 * which steps a rollback still has to undo, and the status a rollback ends in.
 */

/** Condition on a step_runs row `s`: its compensation failed for good and waits in the dead-letter queue. */
export function deadLettered(s: string): string {
  return `EXISTS (SELECT 1 FROM dead_letter_queue d WHERE d.step_id = ${s}.id)`;
}

/** Condition: some compensation of the task `taskId` (an SQL expression) waits in the dead-letter queue. */
export function taskDeadLettered(taskId: string): string {
  return `EXISTS (SELECT 1 FROM dead_letter_queue WHERE task_id = ${taskId})`;
}

/**
 * Condition on a step_runs row `s`: completed, with a compensation that has not run and is
 * not in the dead-letter queue. A rollback undoes exactly these.
 */
export function leftToUndo(s: string): string {
  return `${s}.status = 'completed' AND ${s}.compensation_fn IS NOT NULL AND ${s}.compensated_at IS NULL
          AND NOT ${deadLettered(s)}`;
}

/**
 * The status a rollback ends in, for the three writers that end one (the rollback's owner, the
 * reaper once a task's retries are used up, and the resolution of its last dead letter). Each
 * argument is an SQL expression: `reason` the rollback's reason, `deadLetteredNow` whether a
 * compensation of the task waits in the dead-letter queue, `hadStepsToUndo` whether the task had
 * any. A cancel ends `cancelled`; otherwise `partial_rollback` while a dead letter waits,
 * `rolled_back` when there was something to undo, `failed` when there was nothing.
 */
export function rollbackFinalStatus(reason: string, deadLetteredNow: string, hadStepsToUndo: string): string {
  return `CASE WHEN ${reason} = 'cancelled' THEN 'cancelled'
               WHEN ${deadLetteredNow} THEN 'partial_rollback'
               WHEN ${hadStepsToUndo} THEN 'rolled_back'
               ELSE 'failed' END`;
}
