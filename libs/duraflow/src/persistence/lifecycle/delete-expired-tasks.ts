import { TaskStatus } from '../../domain/task-status';
import { SqlExecutor } from '../duraflow-database';

/** A final status and how long its tasks are kept after they finished. */
export interface ExpiryRule {
  status: TaskStatus;
  keepMs: number;
}

/**
 * Removes up to `batchSize` tasks per rule that finished more than `keepMs` ago, and with them
 * their step runs (the seed schema's ON DELETE CASCADE) and their signals (the statement trigger
 * of migration 900); returns how many went, per status.
 * Each rule picks its rows through idx_agent_tasks_status_created (a task is created before it
 * finishes, so `created_at` bounds the scan) and locks them SKIP LOCKED: a batch never waits
 * for a row another statement holds, and holds its own for one short statement. A task with a
 * dead letter still open is never removed (the entry names it, and its retry needs it).
 */
export async function deleteExpiredTasks(db: SqlExecutor, rules: ExpiryRule[], batchSize: number): Promise<Map<TaskStatus, number>> {
  const removed = new Map<TaskStatus, number>();
  if (!rules.length) return removed;
  const values: unknown[] = [batchSize];
  const picks = rules.map(({ status, keepMs }, index) => {
    values.push(status, keepMs);
    const statusParam = `$${values.length - 1}`;
    const cutoff = `duraflow_now() - $${values.length}::bigint * interval '1 millisecond'`;
    return `pick_${index} AS (
       SELECT t.id FROM agent_tasks t
       WHERE t.status = ${statusParam} AND t.created_at < ${cutoff} AND COALESCE(t.completed_at, t.updated_at) < ${cutoff}
         AND NOT EXISTS (SELECT 1 FROM dead_letter_queue d WHERE d.task_id = t.id)
       LIMIT $1 FOR UPDATE OF t SKIP LOCKED)`;
  });
  const { rows } = await db.query<{ status: TaskStatus; count: string }>(
    `WITH ${picks.join(',\n     ')},
     removed AS (
       DELETE FROM agent_tasks WHERE id IN (${rules.map((_, index) => `SELECT id FROM pick_${index}`).join(' UNION ALL ')})
       RETURNING status)
     SELECT status, count(*) AS count FROM removed GROUP BY status`,
    values,
  );
  for (const row of rows) removed.set(row.status, Number(row.count));
  return removed;
}
