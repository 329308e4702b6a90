import { createHash } from 'node:crypto';
import { ClientBase, QueryResult, QueryResultRow } from 'pg';
import { FlowLimits } from '../../validation/flow-limits';
import { advisoryLockId } from '../../util/advisory-lock-id';
import { SqlExecutor } from '../duraflow-database';
import { countLiteral, textLiteral } from '../literals';
import { CLAIMED_COLUMNS } from './claim-tasks';
import { keyedPick } from './limited-claim-keys';
import { claimableVersions, MOVE, runnable, runnableOrder } from './task-lifecycle';

/**
 * The claim of one workflow with flow control: what `claimTasks` (claim-tasks.ts) does for the others,
 * within the workflow's limits, exact under any number of concurrent claimers. One round trip of
 * three statements, one transaction (the simple query protocol runs them as one):
 *
 * 1. the claim's planner settings (`CLAIM_SETTINGS`), as the plain claim has them;
 * 2. `pg_advisory_xact_lock` on the workflow: every limited claim of it, in every process, waits
 *    here for the one before to commit. It is a statement of its own on purpose: in READ COMMITTED
 *    the next statement takes its snapshot after the lock is granted, so it sees the tasks the
 *    previous claim made `running` and the starts it recorded (a count in the same statement as
 *    the lock would read a snapshot taken before the wait, and overshoot). Transaction-scoped, so
 *    it ends with the claim, also behind pgbouncer in transaction mode;
 * 3. the claim: the free slots are counted from `running` tasks (idx_agent_tasks_flow_running)
 *    and the starts in the window (flow_starts), then tasks are taken in the claim order, per key
 *    in round-robin (below), locked SKIP LOCKED and made `running`; the starts are recorded and
 *    those out of the window pruned, and the key where the walk stopped is kept for the next claim.
 *
 * Fairness with a concurrency key: keys are visited in key order starting after the key where the
 * previous claim of the workflow stopped (flow_limits.key_cursor), wrapping around once; each
 * visited key gives its tasks in the claim order (the runnable order of task-lifecycle.ts), as many as its
 * free slots (keyConcurrency, its rate limit) and the room left in the batch allow. A key with a
 * backlog of any size thus gives at most one batch before the next key's turn. Each visit is a
 * few index probes (the next key in idx_agent_tasks_flow_pending, its running count, its first
 * tasks), so a claim costs what its batch and the keys it passes cost, not the backlog.
 *
 * A task held back by a limit is not touched: it stays `pending`, no retry counted.
 *
 * Statement 3 is the largest the library sends, and planning it cost as much as running it (the
 * keyed walk: 0.5–1 ms of planning a claim). So a process sends it prepared
 * (`claimPreparedLimitedTasks`: `PREPARE` once per connection, in the same round trip as its
 * first claim, then `EXECUTE` with the connection's cached generic plan, still one round trip),
 * and this full text only behind a transaction-mode pooler, where a connection keeps nothing.
 */
export function claimLimitedTasksSql(settings: string, workerId: string, flow: FlowLimits, versions: number[], limit: number): string {
  return `${LIMITED_CLAIM_TAG} ${settings};
    ${limitedClaimLockSql(flow)};
    ${limitedClaimStatement(flow, versions, textLiteral(workerId), countLiteral(limit))}`;
}

/** What names the limited claim's round trip (its first statement) in pg_stat_statements and pg_stat_activity. */
export const LIMITED_CLAIM_TAG = '/* duraflow_claim_limited_tasks */';

/** Statement 2 above: the workflow's advisory lock, held until the claim's transaction ends. */
export function limitedClaimLockSql(flow: FlowLimits): string {
  return `SELECT pg_advisory_xact_lock(${advisoryLockId(`duraflow:flow:${flow.workflowName}`)})`;
}

/**
 * The limited claim of a workflow as a prepared statement: statement 3 above with the worker's
 * id as $1 and the batch as $2, named after its text (its workflow, limits and versions), so
 * a connection that prepared it once runs it again with the plan it cached (see
 * FlowLimitsStore.claimLimitedTasks).
 */
export function preparedLimitedClaim(flow: FlowLimits, versions: number[]): PreparedLimitedClaim {
  const text = limitedClaimStatement(flow, versions, '$1::text', '$2::int');
  return { name: `duraflow_flow_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`, text, lock: limitedClaimLockSql(flow) };
}

/** A limited claim prepared for its workflow (`preparedLimitedClaim`). */
export interface PreparedLimitedClaim {
  name: string;
  text: string;
  lock: string;
}

/**
 * The limited claim on one connection, in one round trip, with its plan cached there: the
 * statement is `PREPARE`d (simple protocol, in the same round trip) the first time this
 * connection runs it, then `EXECUTE`d with the generic plan the connection keeps (planning the
 * keyed walk costs as much as running it). `prepared` holds the names this connection prepared:
 * session state, so never behind a transaction-mode pooler (`claimLimitedTasksSql` there).
 * Returns the claimed rows.
 */
export async function claimPreparedLimitedTasks(
  client: ClientBase,
  prepared: Set<string>,
  settings: string,
  statement: PreparedLimitedClaim,
  workerId: string,
  limit: number,
): Promise<QueryResultRow[]> {
  const prepare = prepared.has(statement.name) ? '' : `PREPARE ${statement.name}(text, int) AS ${statement.text};\n`;
  const results = (await client.query(
    `${prepare}${LIMITED_CLAIM_TAG} ${settings}, set_config('plan_cache_mode', 'force_generic_plan', true);
    ${statement.lock};
    EXECUTE ${statement.name}(${textLiteral(workerId)}, ${countLiteral(limit)})`,
  )) as unknown as QueryResult[];
  prepared.add(statement.name);
  return results[results.length - 1].rows;
}

/** Statement 3: the claim; `workerId` and `limit` are SQL expressions (literals, or parameters). */
function limitedClaimStatement(flow: FlowLimits, versions: number[], workerId: string, limit: string): string {
  const workflow = textLiteral(flow.workflowName);
  const rate = flow.rateLimit;
  const window = rate ? `(clock.at - ${countLiteral(rate.periodMs)} * interval '1 millisecond')` : '';
  // Runnable now, claimable by this process (its versions, not held): the plain claim's rules.
  const claimable = (t: string) => `${runnable(t)} AND ${claimableVersions(t, versions)}`;
  const pick = flow.concurrencyKey ? keyedPick({ workflow, flow, limit, claimable, window }) : unkeyedPick(workflow, claimable);
  return `WITH RECURSIVE
    clock AS MATERIALIZED (SELECT duraflow_clock_timestamp() AS at),
    budget AS MATERIALIZED (SELECT GREATEST(0, LEAST(${workflowCaps(workflow, flow, limit, window).join(', ')}))::bigint AS n),
    ${pick},
    claimed AS (
      UPDATE agent_tasks t SET ${MOVE.claim(workerId, 't', 'clock.at')}
      FROM picked, clock
      WHERE t.id = picked.id
      RETURNING ${CLAIMED_COLUMNS}
    )${rate ? rateStarts(workflow, rate.perKey, window) : ''}
    SELECT * FROM claimed`;
}

/** What the whole workflow may still start now: the batch, its free slots, its rate limit's room. */
function workflowCaps(workflow: string, flow: FlowLimits, limit: string, window: string): string[] {
  const caps = [limit];
  if (flow.concurrency !== null) {
    caps.push(
      `${countLiteral(flow.concurrency)} - (SELECT count(*) FROM agent_tasks r
         WHERE r.workflow_name = ${workflow} AND r.status = 'running' AND r.concurrency_key IS NOT NULL)`,
    );
  }
  const rate = flow.rateLimit;
  if (rate && !rate.perKey) {
    caps.push(
      `${countLiteral(rate.limit)} - (SELECT count(*) FROM flow_starts s, clock
         WHERE s.workflow_name = ${workflow} AND s.rate_key = '' AND s.started_at > ${window})`,
    );
  }
  return caps;
}

/** The starts of a rate-limited workflow recorded, and those out of the window pruned. */
function rateStarts(workflow: string, perKey: boolean, window: string): string {
  return `,
    started AS (
      INSERT INTO flow_starts (workflow_name, rate_key, started_at)
      SELECT ${workflow}, ${perKey ? 'claimed.concurrency_key' : `''`}, clock.at FROM claimed, clock
    ),
    pruned AS (
      DELETE FROM flow_starts s USING clock WHERE s.workflow_name = ${workflow} AND s.started_at <= ${window}
    )`;
}

/** A workflow without a key: its first runnable tasks in the runnable order, as many as the budget allows. */
function unkeyedPick(workflow: string, claimable: (t: string) => string): string {
  return `picked AS (
      SELECT a.id, (a.started_at IS NULL AND a.forked_from IS NULL) AS fresh FROM agent_tasks a
      WHERE a.workflow_name = ${workflow} AND a.concurrency_key = '' AND ${claimable('a')}
      ORDER BY ${runnableOrder('a')}
      LIMIT (SELECT n FROM budget)
      FOR UPDATE OF a SKIP LOCKED
    )`;
}

/**
 * Gives a limited workflow's pending tasks that have no key of its kind the key `''` (submitted
 * before it had limits, or by a node that did not declare them; or keyed while it no longer
 * keys), so its limited claim sees them. Run when a worker registers the workflow's limits.
 */
export async function keyPendingTasks(db: SqlExecutor, flow: FlowLimits): Promise<void> {
  await db.query(
    `UPDATE agent_tasks SET concurrency_key = ''
     WHERE workflow_name = $1 AND status = 'pending' AND (concurrency_key IS NULL OR (NOT $2 AND concurrency_key <> ''))`,
    [flow.workflowName, flow.concurrencyKey !== null],
  );
}
