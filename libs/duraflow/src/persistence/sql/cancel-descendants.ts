import { TASK_FINISHED_CHANNEL, TASK_SUBMITTED_CHANNEL } from '../../domain/duraflow.constants';
import { SqlExecutor } from '../duraflow-database';
import { leftToUndo } from '../rollback-rules';

/**
 * Cancels the unfinished tasks below `rootIds` in the parent/child tree (and the roots
 * themselves with `includeRoots`). With `compensate`, a task with completed steps to undo is
 * handed to the workers for a `cancelled` rollback instead (pending, `rollback_reason`
 * 'cancelled', its claim cleared: whoever claims it next undoes its steps, newest first, and
 * ends it `cancelled`); one with nothing to undo is cancelled at once. A worker running one
 * is fenced out and told through NOTIFY. Returns the ids it cancelled or handed over.
 *
 * The rows are locked deepest first: a child that ends locks its parent (the wake-up trigger of
 * migration 1700000000200), so locking children before parents never waits in a cycle with it.
 *
 * Run after the parent's own cancel committed, never in its transaction: a child that ends
 * meanwhile then finds its parent finished and leaves it alone, so no two statements wait for
 * each other's rows.
 */
export async function cancelDescendants(executor: SqlExecutor, rootIds: string[], options: { includeRoots: boolean; compensate: boolean }) {
  const { rows } = await executor.query<{ id: string }>(
    `WITH RECURSIVE tree AS (
       SELECT id, 1 AS depth FROM agent_tasks WHERE ($2 AND id = ANY($1::uuid[])) OR parent_task_id = ANY($1::uuid[])
       UNION
       SELECT t.id, tree.depth + 1 FROM agent_tasks t JOIN tree ON t.parent_task_id = tree.id
     ), targets AS (
       SELECT t.id, EXISTS (SELECT 1 FROM step_runs s WHERE s.task_id = t.id AND ${leftToUndo('s')}) AS undo
       FROM agent_tasks t JOIN (SELECT id, max(depth) AS depth FROM tree GROUP BY id) d ON d.id = t.id
       WHERE t.status IN ('pending', 'running')
       ORDER BY d.depth DESC, t.id
       FOR NO KEY UPDATE OF t
     ), handed AS (
       UPDATE agent_tasks t
       SET status = 'pending', rollback_reason = 'cancelled', scheduled_at = now(), worker_id = NULL, claim_token = NULL,
           heartbeat_at = NULL, updated_at = now()
       FROM targets WHERE t.id = targets.id AND $3 AND targets.undo
       RETURNING t.id, t.workflow_name
     ), cancelled AS (
       UPDATE agent_tasks t SET status = 'cancelled', completed_at = now(), updated_at = now()
       FROM targets WHERE t.id = targets.id AND NOT ($3 AND targets.undo)
       RETURNING t.id
     ), ended AS (
       SELECT id FROM handed UNION ALL SELECT id FROM cancelled
     )
     SELECT id,
            (SELECT pg_notify('${TASK_FINISHED_CHANNEL}', string_agg(id::text, ',')) FROM ended HAVING count(*) > 0) AS told,
            (SELECT count(pg_notify('${TASK_SUBMITTED_CHANNEL}', workflow_name)) FROM handed) AS woke
     FROM ended`,
    [rootIds, options.includeRoots, options.compensate],
  );
  return rows.map((row) => row.id);
}
