import { TASK_FINISHED_CHANNEL } from '../../domain/duraflow.constants';
import { RollbackReason } from '../../domain/entities/agent-task.entity';
import { TaskStatus } from '../../domain/task-status';
import { DuraflowDatabase } from '../duraflow-database';
import { ownedBy } from '../fencing';
import { rollbackFinalStatus, taskDeadLettered } from '../rollback-rules';

/**
 * Fenced: the rollback is over, and the task takes the status the rollback rules give it
 * (`hadStepsToUndo`: the rollback found steps to undo). The error stays. Null when the claim
 * no longer owns the task.
 *
 * The task row is locked first and the dead-letter queue read in a later statement, so a
 * dead-letter retry that resolved an entry meanwhile (it locks the same row) is seen.
 */
export function finishRollback(
  db: DuraflowDatabase,
  id: string,
  claimToken: string,
  reason: RollbackReason,
  hadStepsToUndo: boolean,
): Promise<TaskStatus | null> {
  return db.transaction(async (tx) => {
    const owned = await tx.query(`SELECT 1 FROM agent_tasks WHERE ${ownedBy('$1', '$2')} FOR UPDATE`, [id, claimToken]);
    if (!owned.rowCount) return null;
    const { rows } = await tx.query<{ status: TaskStatus }>(
      `WITH done AS (
         UPDATE agent_tasks
         SET status = ${rollbackFinalStatus('$2', taskDeadLettered('$1'), '$3')},
             completed_at = now(), updated_at = now()
         WHERE id = $1 RETURNING id, status
       )
       SELECT status, pg_notify('${TASK_FINISHED_CHANNEL}', id::text) FROM done`,
      [id, reason, hadStepsToUndo],
      'duraflow_finish_rollback',
    );
    return rows[0]?.status ?? null;
  });
}
