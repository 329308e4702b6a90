import { TaskProgress } from '../../domain/task-summaries';
import { SqlExecutor } from '../duraflow-database';

/**
 * A task's progress over its three tables in one statement: counts and sums only, so no input
 * or output is read (what a live view polls every second). Null when no task has this id.
 * Heartbeats are left out (they touch `heartbeat_at` only), so a running task that makes no
 * progress reads the same on every poll.
 */
export async function readTaskProgress(db: SqlExecutor, taskId: string): Promise<TaskProgress | null> {
  const { rows } = await db.query(
    `SELECT t.status, t.updated_at, COALESCE(t.retry_count, 0) AS retry_count,
            s.total, s.completed, s.failed, s.compensated, s.attempts, d.open, d.retries
     FROM agent_tasks t
     CROSS JOIN LATERAL (
       SELECT count(*) AS total,
              count(*) FILTER (WHERE status = 'completed') AS completed,
              count(*) FILTER (WHERE status = 'failed') AS failed,
              count(compensated_at) AS compensated,
              COALESCE(sum(attempt), 0) AS attempts
       FROM step_runs WHERE task_id = t.id
     ) s
     CROSS JOIN LATERAL (
       SELECT count(*) AS open, COALESCE(sum(retry_count), 0) AS retries FROM dead_letter_queue WHERE task_id = t.id
     ) d
     WHERE t.id = $1`,
    [taskId],
    'duraflow_task_progress',
  );
  if (!rows.length) return null;
  const row = rows[0];
  return {
    status: row.status,
    updatedAt: row.updated_at,
    retryCount: row.retry_count,
    steps: {
      total: Number(row.total),
      completed: Number(row.completed),
      failed: Number(row.failed),
      compensated: Number(row.compensated),
      attempts: Number(row.attempts),
    },
    deadLetters: { open: Number(row.open), retries: Number(row.retries) },
  };
}
