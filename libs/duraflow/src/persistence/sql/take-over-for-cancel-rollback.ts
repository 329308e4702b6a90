import { TASK_FINISHED_CHANNEL } from '../../domain/duraflow.constants';
import { AgentTask } from '../../domain/entities/agent-task.entity';
import { DuraflowDatabase } from '../duraflow-database';
import { leftToUndo } from '../rollback-rules';
import { TASK_COLUMNS_OF_T, toAgentTask } from '../row-mappers';
import { cancelTask } from './cancel-task';

export interface CancelRollbackTakeOver {
  /** The status the task had; null when no task has this id. */
  previousStatus: string | null;
  /** The task as it is now; null when it had finished already (or does not exist). */
  task: AgentTask | null;
  /** The new claim when there is something to undo under it; null when the task was simply cancelled. */
  claimToken: string | null;
}

/**
 * cancel(id, { compensate: true }): a pending or running task with steps to undo is taken over
 * for a `cancelled` rollback under a new claim (the worker running it is fenced out and told
 * through NOTIFY); one with nothing to undo is cancelled as `cancel` cancels it. The task row
 * is locked before the steps are read (in a later statement), so a checkpoint committed
 * meanwhile is seen.
 */
export function takeOverForCancelRollback(db: DuraflowDatabase, id: string, workerId: string): Promise<CancelRollbackTakeOver> {
  return db.transaction(async (tx) => {
    const locked = await tx.query<{ status: string }>(`SELECT status FROM agent_tasks WHERE id = $1 FOR UPDATE`, [id]);
    if (!locked.rows.length) return { previousStatus: null, task: null, claimToken: null };
    const previousStatus = locked.rows[0].status;
    if (previousStatus !== 'pending' && previousStatus !== 'running') return { previousStatus, task: null, claimToken: null };
    const { rows } = await tx.query(
      `WITH taken AS (
         UPDATE agent_tasks t
         SET status = 'running', rollback_reason = 'cancelled', worker_id = $2, claim_token = gen_random_uuid(),
             heartbeat_at = now(), started_at = COALESCE(t.started_at, now()), completed_at = NULL, updated_at = now()
         WHERE t.id = $1 AND EXISTS (SELECT 1 FROM step_runs s WHERE s.task_id = $1 AND ${leftToUndo('s')})
         RETURNING ${TASK_COLUMNS_OF_T}, t.claim_token
       )
       SELECT taken.*, pg_notify('${TASK_FINISHED_CHANNEL}', id::text) FROM taken`,
      [id, workerId],
    );
    if (rows.length) return { previousStatus, task: toAgentTask(rows[0]), claimToken: rows[0].claim_token as string };
    const cancelled = await cancelTask(tx, id);
    return { previousStatus, task: cancelled.task, claimToken: null };
  });
}
