import { TASK_FINISHED_CHANNEL, TASK_SUBMITTED_CHANNEL } from '../../domain/duraflow.constants';
import { TaskStatus } from '../../domain/task-status';
import type { LeaderFence } from './leader-fence';
import { deadLetterErrorSql } from '../dead-letter-error';
import { SqlExecutor } from '../duraflow-database';
import { leftToUndo, rollbackFinalStatus, taskDeadLettered } from './rollback-rules';
import { MOVE } from './task-lifecycle';

/** What the reaper did with one stale task. */
export interface ReapedTask {
  id: string;
  /** The status it was left in. */
  status: TaskStatus;
  retryCount: number;
  workflowName: string;
  /** The `code` of the task's error (null while it has none). */
  errorCode: string | null;
  /** requeue: to run again; rollback: retries used up, to undo its steps; abandon/end: finished by the reaper. */
  action: 'requeue' | 'rollback' | 'abandon' | 'end';
}

/** The code and name of what the reaper writes once a task's retries are used up, as SQL literals. */
const MAX_RETRIES_EXCEEDED = { code: `'MAX_RETRIES_EXCEEDED'`, name: `'MaxRetriesExceededError'` };

/**
 * Recovers running tasks whose heartbeat is older than `staleAfterMs`, in one statement that
 * locks each stale row (SKIP LOCKED) and re-checks it, so two reapers never double-count:
 * - retries left: back to `pending`, one more retry counted (a rollback in progress resumes);
 * - retries used up, steps to undo: back to `pending` for its rollback (error MAX_RETRIES_EXCEEDED);
 * - retries used up during a rollback: the compensations not yet run go to the dead-letter
 *   queue, and the task ends as the rollback rules say (`partial_rollback`, or `cancelled`);
 * - retries used up, nothing (left) to undo: the task ends (`failed` with MAX_RETRIES_EXCEEDED,
 *   or the rollback's final status).
 * One statement for the three tables, so a reaped rollback's dead letters and its final status
 * commit together.
 *
 * With a `fence` (the elected reaper's passes), the statement reaps only while the fence holds
 * when it runs (LeaderFence): the leader's lease row is locked FOR SHARE and must still have
 * this holder, term and an expiry ahead, or the database's clock must be before the deadline.
 * Otherwise it locks and changes nothing. Without one (an operator's `reapOnce()`), it reaps.
 */
export async function reapStaleTasks(db: SqlExecutor, staleAfterMs: number, fence?: LeaderFence): Promise<ReapedTask[]> {
  const { condition, values, name } = fenceCondition(fence);
  const { rows } = await db.query(reapSql(condition), [staleAfterMs, ...values], name);
  return rows.map(reapedTask);
}

/** A row the reap statement returns. */
export function reapedTask(row: Record<string, any>): ReapedTask {
  return {
    id: row.id,
    status: row.status,
    retryCount: row.retry_count,
    workflowName: row.workflow_name,
    errorCode: row.error_code,
    action: row.action,
  };
}

/** The tasks a reaping pass takes: running, with a heartbeat older than $1 ms. */
const STALE = `t.status = '${TaskStatus.RUNNING}' AND t.heartbeat_at < now() - $1 * interval '1 millisecond'`;

/** Back to pending: to run again (a retry counted), or to roll back. */
const BACK_TO_PENDING = `d.action IN ('requeue', 'rollback')`;

/** The dead letters of the compensations an abandoned rollback never ran. */
const ABANDONED_DEAD_LETTERS = `INSERT INTO dead_letter_queue (task_id, step_id, error)
       SELECT s.task_id, s.id, ${deadLetterErrorSql(
         {
           ...MAX_RETRIES_EXCEEDED,
           message: `'The worker running this rollback stopped heartbeating and the task''s retries are used up; '
                     || 'the compensation was not run (or not recorded). Retry it from the dead-letter queue.'`,
         },
         { stepKey: 's.step_key', compensationFn: 's.compensation_fn', attempt: '0' },
       )}
       FROM step_runs s JOIN decided ON decided.id = s.task_id AND decided.action = 'abandon'
       WHERE ${leftToUndo('s')}
       ON CONFLICT (step_id) DO NOTHING`;

/** The reap move of each decided task: its status, a retry counted, its rollback and error as the action says. */
const REAPED = `UPDATE agent_tasks t
       SET ${MOVE.reap(
         `CASE WHEN ${BACK_TO_PENDING} THEN '${TaskStatus.PENDING}' ELSE ${rollbackFinalStatus(
           't.rollback_reason',
           `(d.action = 'abandon' OR d.dead_lettered)`,
           't.rollback_reason IS NOT NULL',
         )} END`,
         `CASE WHEN ${BACK_TO_PENDING} THEN NULL ELSE duraflow_now() END`,
       )},
           retry_count = CASE WHEN d.action = 'requeue' THEN COALESCE(t.retry_count, 0) + 1 ELSE t.retry_count END,
           rollback_reason = CASE WHEN d.action = 'rollback' THEN 'failed' ELSE t.rollback_reason END,
           error = CASE WHEN d.action = 'requeue' OR t.rollback_reason IS NOT NULL THEN t.error ELSE jsonb_build_object(
             'code', ${MAX_RETRIES_EXCEEDED.code}, 'name', ${MAX_RETRIES_EXCEEDED.name},
             'message', 'The task''s worker stopped heartbeating ' || (COALESCE(t.retry_count, 0) + 1)
                        || ' time(s); max_retries is ' || COALESCE(t.max_retries, 0) || '.') END
       FROM decided d
       WHERE t.id = d.id
       RETURNING t.id, t.status, t.retry_count, t.workflow_name, t.error ->> 'code' AS error_code, d.action`;

/**
 * The reaping pass, its `leader` CTE `fence` (one row while the fence holds), over the running
 * tasks `selection` (a condition on `t`) names: the stale ones, or a node's (recover-node-tasks.ts).
 */
export function reapSql(fence: string, selection = STALE): string {
  return `WITH leader AS (${fence}), stale AS (
       SELECT t.id, t.retry_count, t.max_retries, t.rollback_reason,
              EXISTS (SELECT 1 FROM step_runs s WHERE s.task_id = t.id AND ${leftToUndo('s')}) AS undo_left,
              ${taskDeadLettered('t.id')} AS dead_lettered
       FROM agent_tasks t
       WHERE EXISTS (SELECT 1 FROM leader) AND ${selection}
       FOR UPDATE OF t SKIP LOCKED
     ), decided AS (
       SELECT stale.*,
              CASE WHEN COALESCE(retry_count, 0) < COALESCE(max_retries, 0) THEN 'requeue'
                   WHEN rollback_reason IS NULL AND undo_left THEN 'rollback'
                   WHEN rollback_reason IS NOT NULL AND undo_left THEN 'abandon'
                   ELSE 'end' END AS action
       FROM stale
     ), abandoned AS (
       ${ABANDONED_DEAD_LETTERS}
     ), reaped AS (
       ${REAPED}
     )
     SELECT id, status, retry_count, workflow_name, error_code, action,
            pg_notify(CASE WHEN status = '${TaskStatus.PENDING}' THEN '${TASK_SUBMITTED_CHANNEL}' ELSE '${TASK_FINISHED_CHANNEL}' END,
                      CASE WHEN status = '${TaskStatus.PENDING}' THEN workflow_name ELSE id::text END)
     FROM reaped`;
}

/** The `leader` CTE: one row while the fence holds (values from $2 on), and the statement's prepared name. */
function fenceCondition(fence: LeaderFence | undefined): { condition: string; values: unknown[]; name: string } {
  if (!fence) return { condition: 'SELECT 1', values: [], name: 'duraflow_reap' };
  if (fence.kind === 'lease') {
    // Locked FOR SHARE: a takeover (an UPDATE of this row) waits for this pass to commit.
    return {
      condition: `SELECT 1 FROM duraflow_leader
                  WHERE name = $2 AND holder = $3 AND term = $4::bigint AND expires_at > clock_timestamp()
                  FOR SHARE`,
      values: [fence.name, fence.holder, fence.term],
      name: 'duraflow_reap_leased',
    };
  }
  return {
    condition: `SELECT 1 WHERE clock_timestamp() < to_timestamp($2::float8 / 1000)`,
    values: [fence.deadlineEpochMs],
    name: 'duraflow_reap_until',
  };
}
