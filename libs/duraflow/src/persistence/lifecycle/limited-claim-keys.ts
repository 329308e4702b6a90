import { FlowLimits } from '../../validation/flow-limits';
import { countLiteral } from '../literals';
import { runnableOrder } from './task-lifecycle';

/** How many keys one claim visits at most (a claim that finds nothing stops there; the next goes on from there). */
const MAX_KEYS_VISITED = 200;

/** What the keyed walk is built from: SQL expressions and the claimable condition of the claim it is part of. */
export interface KeyedPick {
  /** The workflow's name as an SQL literal. */
  workflow: string;
  flow: FlowLimits;
  /** The batch (an SQL expression). */
  limit: string;
  /** Condition on a task row: runnable now and claimable by this process. */
  claimable: (t: string) => string;
  /** The rate limit's window start (an SQL expression), or '' without a rate limit. */
  window: string;
}

/**
 * A keyed workflow's `picked` CTE: the round-robin walk over its keys (a recursive loose index
 * scan of idx_agent_tasks_flow_pending from the cursor, wrapping around once), then each visited
 * key's first tasks in the runnable order, locked SKIP LOCKED; the cursor moves to the last key
 * visited (claim-limited-tasks.ts says why the walk is shaped so).
 */
export function keyedPick(pick: KeyedPick): string {
  const { workflow, claimable } = pick;
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
          (SELECT (${nextKey(workflow, ' AND a.concurrency_key > w.k')}) AS k, w.wrapped AS wrapped)
          UNION ALL
          (SELECT (${nextKey(workflow, '')}), true WHERE NOT w.wrapped)
        ) AS candidates
        WHERE k IS NOT NULL
        LIMIT 1
      ) AS nk
      CROSS JOIN LATERAL (
        SELECT GREATEST(0, LEAST(b.n - w.taken, ${keyCaps(pick).join(', ')}))::bigint AS take FROM budget b
        OFFSET 0 -- evaluated once per key (pulled up, each use of take would count again)
      ) AS t
      WHERE w.taken < (SELECT n FROM budget) AND w.visited < ${MAX_KEYS_VISITED}
        AND NOT (nk.wrapped AND nk.k > (SELECT k FROM cursor))
    ),
    picked AS (
      SELECT p.id, p.fresh FROM walk w
      CROSS JOIN LATERAL (
        SELECT a.id, (a.started_at IS NULL AND a.forked_from IS NULL) AS fresh FROM agent_tasks a
        WHERE a.workflow_name = ${workflow} AND a.concurrency_key = w.k AND ${claimable('a')}
        ORDER BY ${runnableOrder('a')}
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

/** The next key with a pending task after the walk's key (`after`), in key order. */
function nextKey(workflow: string, after: string): string {
  return `SELECT a.concurrency_key::varchar FROM agent_tasks a
     WHERE a.workflow_name = ${workflow} AND a.status = 'pending' AND a.concurrency_key IS NOT NULL${after}
     ORDER BY a.concurrency_key LIMIT 1`;
}

/** What one key (`nk.k`) may still start now, beyond the room left in the batch. */
function keyCaps({ workflow, flow, limit, claimable, window }: KeyedPick): string[] {
  const rate = flow.rateLimit;
  // No key ever gives more than this in one claim: its runnable tasks are counted up to it only.
  const perKeyCaps = [flow.keyConcurrency, rate?.perKey ? rate.limit : null].filter((cap): cap is number => cap !== null);
  const mostPerKey = perKeyCaps.length ? `LEAST(${limit}, ${perKeyCaps.map(countLiteral).join(', ')})` : limit;
  const caps = [
    `(SELECT count(*) FROM (SELECT 1 FROM agent_tasks p
       WHERE p.workflow_name = ${workflow} AND p.concurrency_key = nk.k AND ${claimable('p')}
       LIMIT ${mostPerKey}) AS runnable)`,
  ];
  if (flow.keyConcurrency !== null) {
    caps.push(
      `${countLiteral(flow.keyConcurrency)} - (SELECT count(*) FROM agent_tasks r
         WHERE r.workflow_name = ${workflow} AND r.concurrency_key = nk.k AND r.status = 'running')`,
    );
  }
  if (rate?.perKey) {
    caps.push(
      `${countLiteral(rate.limit)} - (SELECT count(*) FROM flow_starts s, clock
         WHERE s.workflow_name = ${workflow} AND s.rate_key = nk.k AND s.started_at > ${window})`,
    );
  }
  return caps;
}
