import { AgentTask } from '../../domain/entities/agent-task.entity';
import { QueryResult } from 'pg';
import { DuraflowDatabase, SqlExecutor } from '../duraflow-database';
import { countLiteral, textLiteral } from '../literals';
import { TASK_COLUMNS_OF_T, toAgentTask } from '../row-mappers';
import { claimableCondition, ClaimableWorkflows, claimableVersions, MOVE, runnable, runnableOrder } from './task-lifecycle';

/** A task this worker claimed, with the fencing token every later write must carry. */
export interface ClaimedTask {
  task: AgentTask;
  claimToken: string;
  /**
   * Never claimed before (`started_at` was empty) and no fork (a fork's copied steps are written
   * with it): no step of it can have been written, so the run skips reading its checkpoints.
   */
  fresh?: boolean;
  /** The trace context stored at submit (`traceparent`, `tracestate`), continued by the run's span. */
  traceContext?: Record<string, string> | null;
}

/**
 * The claim's transaction (through the pool, the claim alone) runs with these, LOCAL to it.
 *
 * Planner: the claim's ORDER BY is its index's order and its rows are the index's, so an ordered
 * walk of that index, stopped after `limit` locked rows, costs the same at any queue depth. The
 * planner picks it only when the statistics know the backlog: after a burst of submits into a
 * table analyzed empty, never analyzed, or analyzed while every task was finished, it expects
 * one pending row and sorts a bitmap scan of every pending task instead (~20 ms a claim at 100k
 * pending, against ~0.2 ms). With every other way to deliver rows in that order off (sorts,
 * bitmap and sequential scans), and hash and merge joins off for the lookup of the claimed rows
 * by id, the walk is the one plan left whatever the statistics say. jit off: were the walk ever
 * impossible, the disabled plan left would cost over 10^10 and be JIT-compiled on every claim.
 *
 * synchronous_commit: the claim commits without waiting for its WAL flush. Safe: losing it in a
 * server crash only puts the task back to pending, and no write of the run can outlive it (each
 * checkpoint's synchronous commit flushes the WAL up to itself, the claim included).
 */
export const CLAIM_SETTINGS = `SELECT ${[
  'enable_sort',
  'enable_incremental_sort',
  'enable_bitmapscan',
  'enable_seqscan',
  'enable_hashjoin',
  'enable_mergejoin',
  'jit',
  'synchronous_commit',
]
  .map((setting) => `set_config('${setting}', 'off', true)`)
  .join(', ')}`;

/** What a claim returns of each task it made `running`: its columns, its new claim token, whether it is fresh, its trace. */
export const CLAIMED_COLUMNS = `${TASK_COLUMNS_OF_T}, t.claim_token, picked.fresh, t.trace_context`;

/**
 * Claims up to `limit` runnable tasks of the (workflow, version) pairs given, not held, in the
 * runnable order (task-lifecycle.ts): an ordered walk of idx_agent_tasks_claim whatever the
 * statistics say (CLAIM_SETTINGS), sent with its settings in one round trip. SKIP LOCKED lets
 * concurrent claimers pass each other's rows; each claim gets a new fencing token. The simple
 * query protocol carries no parameters, so the values are written in as literals.
 */
export async function claimTasks(db: SqlExecutor, workerId: string, workflows: ClaimableWorkflows, limit: number): Promise<ClaimedTask[]> {
  const { rows } = await db.query(`${CLAIM_TAG} ${CLAIM_SETTINGS};\n${claimStatement(workerId, workflows, limit)}`);
  return toClaimedTasks(rows);
}

/** What names the plain claim's round trip in pg_stat_statements, pg_stat_activity and the bench's counts. */
const CLAIM_TAG = '/* duraflow_claim_tasks */';

/**
 * The plain claim, and in the same round trip and transaction a probe: which of `probed` (limited
 * workflows, claimed by their own statement) have a runnable task, each an index probe of
 * idx_agent_tasks_flow_pending (the limited claim's rows: pending, keyed). An idle worker's poll
 * thus asks about every workflow it runs in one transaction, and sends a limited claim only for
 * a workflow the probe found work for. The probe runs under the claim's settings, before it.
 */
export async function claimTasksProbing(
  db: DuraflowDatabase,
  workerId: string,
  workflows: ClaimableWorkflows,
  limit: number,
  probed: ReadonlyArray<{ name: string; versions: readonly number[] }>,
): Promise<{ claimed: ClaimedTask[]; runnable: string[] }> {
  const probe = probed
    .map(
      ({ name, versions }) =>
        `SELECT ${textLiteral(name)}::text AS workflow_name WHERE EXISTS (SELECT 1 FROM agent_tasks a
           WHERE a.workflow_name = ${textLiteral(name)} AND a.concurrency_key IS NOT NULL AND ${runnable('a')} AND ${claimableVersions('a', versions)})`,
    )
    .join(' UNION ALL ');
  const results = (await db.onConnection((client) =>
    client.query(`${CLAIM_TAG} ${CLAIM_SETTINGS};\n${probe};\n${claimStatement(workerId, workflows, limit)}`),
  )) as unknown as QueryResult[];
  return { claimed: toClaimedTasks(results[2].rows), runnable: results[1].rows.map((row) => row.workflow_name as string) };
}

/** The claim's UPDATE: its rows an ordered walk of idx_agent_tasks_claim (under CLAIM_SETTINGS). */
function claimStatement(workerId: string, workflows: ClaimableWorkflows, limit: number): string {
  return `UPDATE agent_tasks t
     SET ${MOVE.claim(textLiteral(workerId))}
     FROM (
       SELECT a.id, (a.started_at IS NULL AND a.forked_from IS NULL) AS fresh FROM agent_tasks a
       WHERE ${runnable('a')} AND ${claimableCondition(workflows, 'a')}
       ORDER BY ${runnableOrder('a')}
       LIMIT ${countLiteral(limit)}
       FOR UPDATE SKIP LOCKED
     ) picked
     WHERE t.id = picked.id
     RETURNING ${CLAIMED_COLUMNS}`;
}

/** The rows a claim returned, in the runnable order (UPDATE … RETURNING keeps no order). */
export function toClaimedTasks(rows: Array<Record<string, any>>): ClaimedTask[] {
  const since = (task: AgentTask) => (task.scheduledAt ?? task.createdAt)?.getTime() ?? -Infinity;
  return rows
    .map((row) => ({
      task: toAgentTask(row),
      claimToken: row.claim_token as string,
      fresh: row.fresh as boolean,
      traceContext: row.trace_context as Record<string, string> | null,
    }))
    .sort((a, b) => b.task.priority - a.task.priority || since(a.task) - since(b.task));
}
