import { createHash } from 'node:crypto';
import { ClientBase, QueryResult, QueryResultRow } from 'pg';
import { FlowLimits } from '../../validation/flow-limits';
import { advisoryLockId } from '../../util/advisory-lock-id';
import { countLiteral, textLiteral } from '../literals';
import { TASK_COLUMNS_OF_T } from '../row-mappers';

/**
 * The claim of one workflow with flow control: what `TaskStore.claimTasks` does for the others,
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
 * visited key gives its tasks in the claim order (priority DESC, created_at, id), as many as its
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
  // Only versions this process registers, and no task the determinism guard holds (claimable-workflows.ts).
  const versionList = versions.length ? versions : [1];
  const claimableVersion = (alias: string) =>
    `${alias}.held_at IS NULL AND coalesce(${alias}.workflow_version, 1) = ANY(ARRAY[${versionList.map(countLiteral).join(', ')}]::int[])`;
  const rate = flow.rateLimit;
  const window = rate ? `(clock.at - ${countLiteral(rate.periodMs)} * interval '1 millisecond')` : '';
  const runnable = (alias: string) =>
    `${alias}.status = 'pending' AND ${alias}.deleted_at IS NULL AND (${alias}.scheduled_at IS NULL OR ${alias}.scheduled_at <= now()) AND ${claimableVersion(alias)}`;

  // What the whole workflow may still start now.
  const workflowCaps = [limit];
  if (flow.concurrency !== null) {
    workflowCaps.push(
      `${countLiteral(flow.concurrency)} - (SELECT count(*) FROM agent_tasks r
         WHERE r.workflow_name = ${workflow} AND r.status = 'running' AND r.concurrency_key IS NOT NULL)`,
    );
  }
  if (rate && !rate.perKey) {
    workflowCaps.push(
      `${countLiteral(rate.limit)} - (SELECT count(*) FROM flow_starts s, clock
         WHERE s.workflow_name = ${workflow} AND s.rate_key = '' AND s.started_at > ${window})`,
    );
  }

  const pick = flow.concurrencyKey ? keyedPick(workflow, flow, limit, runnable, window) : unkeyedPick(workflow, runnable);
  const rateKey = rate?.perKey ? 'claimed.concurrency_key' : `''`;
  return `WITH RECURSIVE
    clock AS MATERIALIZED (SELECT clock_timestamp() AS at),
    budget AS MATERIALIZED (SELECT GREATEST(0, LEAST(${workflowCaps.join(', ')}))::bigint AS n),
    ${pick},
    claimed AS (
      UPDATE agent_tasks t
      SET status = 'running', worker_id = ${workerId}, claim_token = gen_random_uuid(),
          started_at = COALESCE(t.started_at, clock.at), heartbeat_at = now(), updated_at = now()
      FROM picked, clock
      WHERE t.id = picked.id
      RETURNING ${TASK_COLUMNS_OF_T}, t.claim_token, picked.fresh, t.trace_context
    )${
      rate
        ? `,
    started AS (
      INSERT INTO flow_starts (workflow_name, rate_key, started_at)
      SELECT ${workflow}, ${rateKey}, clock.at FROM claimed, clock
    ),
    pruned AS (
      DELETE FROM flow_starts s USING clock WHERE s.workflow_name = ${workflow} AND s.started_at <= ${window}
    )`
        : ''
    }
    SELECT * FROM claimed`;
}

/** A workflow without a key: its first runnable tasks in the claim order, as many as the budget allows. */
function unkeyedPick(workflow: string, runnable: (alias: string) => string): string {
  return `picked AS (
      SELECT a.id, a.started_at IS NULL AS fresh FROM agent_tasks a
      WHERE a.workflow_name = ${workflow} AND a.concurrency_key = '' AND ${runnable('a')}
      ORDER BY a.priority DESC, a.created_at, a.id
      LIMIT (SELECT n FROM budget)
      FOR UPDATE OF a SKIP LOCKED
    )`;
}

/** How many keys one claim visits at most (a claim that finds nothing stops there; the next goes on from there). */
const MAX_KEYS_VISITED = 200;

/**
 * A keyed workflow: the round-robin walk over its keys (a recursive loose index scan of
 * idx_agent_tasks_flow_pending from the cursor, wrapping around once), then each visited key's
 * first tasks, locked SKIP LOCKED; the cursor moves to the last key visited.
 */
function keyedPick(workflow: string, flow: FlowLimits, limit: string, runnable: (alias: string) => string, window: string): string {
  const rate = flow.rateLimit;
  // No key ever gives more than this in one claim: its runnable tasks are counted up to it only.
  const perKeyCaps = [flow.keyConcurrency, rate?.perKey ? rate.limit : null].filter((cap): cap is number => cap !== null);
  const mostPerKey = perKeyCaps.length ? `LEAST(${limit}, ${perKeyCaps.map(countLiteral).join(', ')})` : limit;
  // What one key may still start now, beyond the room left in the batch.
  const keyCaps: string[] = [
    `(SELECT count(*) FROM (SELECT 1 FROM agent_tasks p
       WHERE p.workflow_name = ${workflow} AND p.concurrency_key = nk.k AND ${runnable('p')}
       LIMIT ${mostPerKey}) AS runnable)`,
  ];
  if (flow.keyConcurrency !== null) {
    keyCaps.push(
      `${countLiteral(flow.keyConcurrency)} - (SELECT count(*) FROM agent_tasks r
         WHERE r.workflow_name = ${workflow} AND r.concurrency_key = nk.k AND r.status = 'running')`,
    );
  }
  if (rate?.perKey) {
    keyCaps.push(
      `${countLiteral(rate.limit)} - (SELECT count(*) FROM flow_starts s, clock
         WHERE s.workflow_name = ${workflow} AND s.rate_key = nk.k AND s.started_at > ${window})`,
    );
  }
  const nextKey = (after: string) =>
    `SELECT a.concurrency_key::varchar FROM agent_tasks a
     WHERE a.workflow_name = ${workflow} AND a.status = 'pending' AND a.concurrency_key IS NOT NULL${after}
     ORDER BY a.concurrency_key LIMIT 1`;
  return `cursor AS MATERIALIZED (
      SELECT COALESCE((SELECT key_cursor FROM flow_limits WHERE workflow_name = ${workflow}), '')::varchar AS k
    ),
    walk (k, wrapped, taken, visited, take) AS (
      SELECT c.k, false, 0::bigint, 0, 0::bigint FROM cursor c
      UNION ALL
      SELECT nk.k, nk.wrapped, w.taken + t.take, w.visited + 1, t.take
      FROM walk w
      CROSS JOIN LATERAL (
        SELECT k, wrapped FROM (
          (SELECT (${nextKey(' AND a.concurrency_key > w.k')}) AS k, w.wrapped AS wrapped)
          UNION ALL
          (SELECT (${nextKey('')}), true WHERE NOT w.wrapped)
        ) AS candidates
        WHERE k IS NOT NULL
        LIMIT 1
      ) AS nk
      CROSS JOIN LATERAL (
        SELECT GREATEST(0, LEAST(b.n - w.taken, ${keyCaps.join(', ')}))::bigint AS take FROM budget b
        OFFSET 0 -- evaluated once per key (pulled up, each use of take would count again)
      ) AS t
      WHERE w.taken < (SELECT n FROM budget) AND w.visited < ${MAX_KEYS_VISITED}
        AND NOT (nk.wrapped AND nk.k > (SELECT k FROM cursor))
    ),
    picked AS (
      SELECT p.id, p.fresh FROM walk w
      CROSS JOIN LATERAL (
        SELECT a.id, a.started_at IS NULL AS fresh FROM agent_tasks a
        WHERE a.workflow_name = ${workflow} AND a.concurrency_key = w.k AND ${runnable('a')}
        ORDER BY a.priority DESC, a.created_at, a.id
        LIMIT w.take
        FOR UPDATE OF a SKIP LOCKED
      ) AS p
      WHERE w.visited > 0 AND w.take > 0
    ),
    moved AS (
      INSERT INTO flow_limits (workflow_name, key_cursor)
      SELECT ${workflow}, w.k FROM walk w WHERE w.visited = (SELECT max(visited) FROM walk) AND w.visited > 0
      ON CONFLICT (workflow_name) DO UPDATE SET key_cursor = EXCLUDED.key_cursor
    )`;
}
