import { SqlExecutor } from '../duraflow-database';
import { rollbackFinalStatus, taskDeadLettered } from './rollback-rules';
import { MOVE } from './task-lifecycle';
import { markCompensatedSql } from '../step.store';

/** The entry being resolved. */
export interface ResolvedDeadLetter {
  id: string;
  taskId: string;
  stepId: string;
}

/**
 * A dead letter is resolved (its compensation succeeded on retry, or a person undid the effect
 * by hand and discarded it), inside the caller's transaction: the entry goes; with
 * `compensated` its step gets `compensated_at` (fenced on this transaction removing the entry);
 * a `partial_rollback` task takes the status the rollback rules give it once the entry is gone
 * (`rolled_back` when it was its last). Returns the task's status (null when it is gone).
 */
export async function resolveDeadLetter(tx: SqlExecutor, entry: ResolvedDeadLetter, compensated: boolean): Promise<string | null> {
  // Resolutions of one task's entries take turns on its row, and each reads the queue in a
  // statement after the lock: two entries resolved at once cannot both still see the other.
  await tx.query(`SELECT 1 FROM agent_tasks WHERE id = $1 FOR UPDATE`, [entry.taskId]);
  await tx.query(
    compensated
      ? `WITH removed AS (DELETE FROM dead_letter_queue WHERE id = $1 RETURNING step_id)
         ${markCompensatedSql('$2', 'id IN (SELECT step_id FROM removed)')}`
      : `DELETE FROM dead_letter_queue WHERE id = $1`,
    compensated ? [entry.id, entry.stepId] : [entry.id],
  );
  const { rows } = await tx.query(
    `WITH decided AS (
       SELECT id, ${rollbackFinalStatus('rollback_reason', taskDeadLettered('$1'), 'true')} AS status
       FROM agent_tasks WHERE id = $1 AND status = 'partial_rollback'
     ), moved AS (
       UPDATE agent_tasks t SET ${MOVE.resolve('decided.status')}
       FROM decided WHERE t.id = decided.id AND decided.status <> 'partial_rollback'
       RETURNING t.status
     )
     SELECT COALESCE((SELECT status FROM moved), (SELECT status FROM agent_tasks WHERE id = $1)) AS status`,
    [entry.taskId],
  );
  return rows[0]?.status ?? null;
}
