import { TASK_FINISHED_CHANNEL } from '../../domain/duraflow.constants';
import { AgentTask } from '../../domain/entities/agent-task.entity';
import { SqlExecutor } from '../duraflow-database';
import { TASK_COLUMNS_OF_T, toAgentTask } from '../row-mappers';

/**
 * Cancels a pending or running task, on `executor`: alone (`TaskStore.cancelTask`), or inside
 * cancel's take-over when the task has nothing to undo. A running task is fenced out at once
 * (its claim no longer owns a running task); the NOTIFY tells its worker to abort the current step.
 */
export async function cancelTask(executor: SqlExecutor, id: string): Promise<{ task: AgentTask | null; previousStatus: string | null }> {
  const { rows } = await executor.query(
    `WITH target AS (
       SELECT id, status FROM agent_tasks WHERE id = $1 FOR UPDATE
     ), cancelled AS (
       UPDATE agent_tasks t SET status = 'cancelled', completed_at = now(), updated_at = now()
       FROM target WHERE t.id = target.id AND target.status IN ('pending', 'running')
       RETURNING ${TASK_COLUMNS_OF_T}
     )
     SELECT target.status AS previous_status, cancelled.*,
            (SELECT pg_notify('${TASK_FINISHED_CHANNEL}', id::text) FROM cancelled) AS notified
     FROM target LEFT JOIN cancelled ON cancelled.id = target.id`,
    [id],
  );
  if (!rows.length) return { task: null, previousStatus: null };
  const row = rows[0];
  return { task: row.id ? toAgentTask(row) : null, previousStatus: row.previous_status };
}
