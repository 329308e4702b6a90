import { TASK_FINISHED_CHANNEL, TASK_SUBMITTED_CHANNEL } from '../../domain/duraflow.constants';
import { AgentTask } from '../../domain/entities/agent-task.entity';
import { TaskStatus } from '../../domain/task-status';
import { DuraflowDatabase, SqlExecutor } from '../duraflow-database';
import { TASK_COLUMNS_OF_T, toAgentTask } from '../row-mappers';
import { leftToUndo } from './rollback-rules';
import { MOVE } from './task-lifecycle';

/** The statuses a cancel moves a task from. */
const CANCELLABLE = `('${TaskStatus.PENDING}', '${TaskStatus.RUNNING}')`;
const CANCELLED = `'${TaskStatus.CANCELLED}'`;

/** What a cancel found: the status the task had (null: no such task) and the task as it is now (null: it had finished). */
export interface CancelledTask {
  previousStatus: string | null;
  task: AgentTask | null;
}

/**
 * The cancel move of a pending or running task, on `executor`: alone, or inside cancel's
 * take-over when the task has nothing to undo. A running task is fenced out at once (its claim
 * no longer owns a running task); the NOTIFY tells its worker to abort the current step.
 */
export async function cancelTask(executor: SqlExecutor, id: string): Promise<CancelledTask> {
  const { rows } = await executor.query(
    `WITH target AS (
       SELECT id, status FROM agent_tasks WHERE id = $1 FOR UPDATE
     ), cancelled AS (
       UPDATE agent_tasks t SET ${MOVE.finish(CANCELLED)}
       FROM target WHERE t.id = target.id AND target.status IN ${CANCELLABLE}
       RETURNING ${TASK_COLUMNS_OF_T}
     )
     SELECT target.status AS previous_status, cancelled.*,
            (SELECT pg_notify('${TASK_FINISHED_CHANNEL}', id::text) FROM cancelled) AS notified
     FROM target LEFT JOIN cancelled ON cancelled.id = target.id`,
    [id],
  );
  if (!rows.length) return { previousStatus: null, task: null };
  const row = rows[0];
  return { task: row.id ? toAgentTask(row) : null, previousStatus: row.previous_status };
}

/** What cancel's take-over found: the cancel's answer, and the new claim when there is something to undo under it. */
export interface CancelRollbackTakeOver extends CancelledTask {
  claimToken: string | null;
}

/**
 * cancel(id, { compensate: true }): the take-over move of a pending or running task with steps
 * to undo, for a `cancelled` rollback under a new claim (the worker running it is fenced out and
 * told through NOTIFY); a task with nothing to undo is cancelled as `cancelTask` cancels it. The
 * task row is locked before the steps are read (in a later statement), so a checkpoint committed
 * meanwhile is seen.
 */
export function takeOverForCancelRollback(db: DuraflowDatabase, id: string, workerId: string): Promise<CancelRollbackTakeOver> {
  return db.transaction(async (tx) => {
    const locked = await tx.query<{ status: string }>(`SELECT status FROM agent_tasks WHERE id = $1 FOR UPDATE`, [id]);
    if (!locked.rows.length) return { previousStatus: null, task: null, claimToken: null };
    const previousStatus = locked.rows[0].status;
    if (previousStatus !== TaskStatus.PENDING && previousStatus !== TaskStatus.RUNNING)
      return { previousStatus, task: null, claimToken: null };
    const { rows } = await tx.query(
      `WITH taken AS (
         UPDATE agent_tasks t SET ${MOVE.takeOver('$2')}
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

/**
 * Cancels the unfinished tasks below `rootIds` in the parent/child tree (and the roots
 * themselves with `includeRoots`). With `compensate`, a task with completed steps to undo is
 * handed over to the workers for a `cancelled` rollback instead (MOVE.handOver: whoever claims
 * it next undoes its steps, newest first, and ends it `cancelled`); one with nothing to undo is
 * cancelled at once. A worker running one is fenced out and told through NOTIFY. With
 * `compensate`, a task already rolling back is left to finish its rollback: handing it over again
 * would fence out the worker in the middle of a compensation, to run it a second time. Returns
 * the ids it cancelled or handed over: a task that had finished (or finishes while this waits for
 * its row), or is rolling back, is not among them.
 *
 * The rows are locked deepest first: a child that ends locks its parent (the wake-up trigger of
 * migration 1700000000200), so locking children before parents never waits in a cycle with it.
 * Run after the parent's own cancel committed, never in its transaction: a child that ends
 * meanwhile then finds its parent finished and leaves it alone.
 */
export async function cancelDescendants(
  executor: SqlExecutor,
  rootIds: string[],
  options: { includeRoots: boolean; compensate: boolean },
): Promise<string[]> {
  const { rows } = await executor.query<{ id: string }>(
    `WITH RECURSIVE tree AS (
       SELECT id, 1 AS depth FROM agent_tasks WHERE ($2 AND id = ANY($1::uuid[])) OR parent_task_id = ANY($1::uuid[])
       UNION
       SELECT t.id, tree.depth + 1 FROM agent_tasks t JOIN tree ON t.parent_task_id = tree.id
     ), targets AS (
       SELECT t.id, EXISTS (SELECT 1 FROM step_runs s WHERE s.task_id = t.id AND ${leftToUndo('s')}) AS undo
       FROM agent_tasks t JOIN (SELECT id, max(depth) AS depth FROM tree GROUP BY id) d ON d.id = t.id
       WHERE t.status IN ${CANCELLABLE} AND NOT ($3 AND t.rollback_reason IS NOT NULL)
       ORDER BY d.depth DESC, t.id
       FOR NO KEY UPDATE OF t
     ), handed AS (
       UPDATE agent_tasks t SET ${MOVE.handOver}
       FROM targets WHERE t.id = targets.id AND $3 AND targets.undo
       RETURNING t.id, t.workflow_name
     ), cancelled AS (
       UPDATE agent_tasks t SET ${MOVE.finish(CANCELLED)}
       FROM targets WHERE t.id = targets.id AND NOT ($3 AND targets.undo)
       RETURNING t.id
     ), ended AS (
       SELECT id FROM handed UNION ALL SELECT id FROM cancelled
     )
     SELECT id,
            ${notifyFinished('ended')} AS told,
            (SELECT count(pg_notify('${TASK_SUBMITTED_CHANNEL}', workflow_name)) FROM handed) AS woke
     FROM ended`,
    [rootIds, options.includeRoots, options.compensate],
  );
  return rows.map((row) => row.id);
}

/** pg_notify on TASK_FINISHED_CHANNEL of the ids in `rows` (an SQL relation with `id`), 200 to a payload (under its 8,000 bytes). */
function notifyFinished(rows: string): string {
  return `(SELECT count(pg_notify('${TASK_FINISHED_CHANNEL}', ids)) FROM (
            SELECT string_agg(id::text, ',') AS ids FROM (SELECT id, row_number() OVER () - 1 AS n FROM ${rows}) numbered GROUP BY n / 200
          ) chunks)`;
}

/** What cancelMany's move did to one batch: the ids cancelled, and the tasks taken over for a `cancelled` rollback with their claims. */
export interface CancelledBatch {
  cancelled: string[];
  takenOver: Array<{ task: AgentTask; claimToken: string }>;
}

/**
 * cancelMany's move of a batch whose rows `tx` locked (bulk-batches.ts): the cancel move of each,
 * or, with `compensate`, the take-over move of each with steps to undo (under a claim of
 * `workerId`, as `takeOverForCancelRollback` takes one task over). The steps are read in a later
 * statement than the lock, so a checkpoint committed meanwhile is seen.
 */
export async function cancelLockedTasks(tx: SqlExecutor, ids: string[], compensate: boolean, workerId: string): Promise<CancelledBatch> {
  const taken = compensate
    ? await tx.query(
        `WITH taken AS (
           UPDATE agent_tasks t SET ${MOVE.takeOver('$2')}
           WHERE t.id = ANY($1::uuid[]) AND EXISTS (SELECT 1 FROM step_runs s WHERE s.task_id = t.id AND ${leftToUndo('s')})
           RETURNING ${TASK_COLUMNS_OF_T}, t.claim_token
         )
         SELECT taken.*, ${notifyFinished('taken')} AS told FROM taken`,
        [ids, workerId],
      )
    : { rows: [] };
  const takenIds = new Set(taken.rows.map((row) => row.id as string));
  const { rows } = await tx.query<{ ids: string[] | null }>(
    `WITH cancelled AS (
       UPDATE agent_tasks t SET ${MOVE.finish(CANCELLED)} WHERE t.id = ANY($1::uuid[]) AND t.status IN ${CANCELLABLE} RETURNING t.id
     )
     SELECT (SELECT array_agg(id) FROM cancelled) AS ids, ${notifyFinished('cancelled')} AS told`,
    [ids.filter((id) => !takenIds.has(id))],
  );
  return {
    cancelled: rows[0].ids ?? [],
    takenOver: taken.rows.map((row) => ({ task: toAgentTask(row), claimToken: row.claim_token as string })),
  };
}
