import { FlowLimitStats } from '../../domain/flow-control';
import type { SqlExecutor } from '../duraflow-database';
import { runnable } from '../lifecycle/task-lifecycle';

/** How many keys at their limit one read lists per workflow (the most waiting first). */
const KEYS_LISTED = 20;

/**
 * What waits on which limit, for every workflow in flow_limits (as the workers that register
 * them last wrote them) or only `workflowNames`: per workflow its concurrency and rate limit,
 * and the keys at their keyConcurrency or per-key rate limit with tasks waiting (at most 20 per
 * workflow, the most waiting first). Read-only, a few index scans per workflow; the waiting
 * counts read the workflow's pending tasks (idx_agent_tasks_flow_pending).
 */
export async function readFlowLimits(executor: SqlExecutor, workflowNames?: string[]): Promise<FlowLimitStats[]> {
  const { rows } = await executor.query<{
    workflow: string;
    key: string | null;
    kind: FlowLimitStats['kind'];
    running: number;
    limit: number;
    waiting: number;
  }>(FLOW_LIMITS, [workflowNames ?? null]);
  return rows.map((row) => ({
    workflow: row.workflow,
    ...(row.key !== null && { key: row.key }),
    kind: row.kind,
    running: row.running,
    limit: row.limit,
    waiting: row.waiting,
  }));
}

/** The statement of `readFlowLimits`: $1 the workflows to read (null: every one in flow_limits). */
const FLOW_LIMITS = `WITH limits AS (
       SELECT * FROM flow_limits WHERE $1::varchar[] IS NULL OR workflow_name = ANY($1::varchar[])
     ), pending AS (
       SELECT p.workflow_name, p.concurrency_key, count(*)::int AS waiting
       FROM agent_tasks p JOIN limits l ON l.workflow_name = p.workflow_name
       WHERE p.concurrency_key IS NOT NULL AND ${runnable('p')}
       GROUP BY p.workflow_name, p.concurrency_key
     ), running AS (
       SELECT r.workflow_name, r.concurrency_key, count(*)::int AS running
       FROM agent_tasks r JOIN limits l ON l.workflow_name = r.workflow_name
       WHERE r.status = 'running' AND r.concurrency_key IS NOT NULL
       GROUP BY r.workflow_name, r.concurrency_key
     ), starts AS (
       SELECT s.workflow_name, s.rate_key, count(*)::int AS started
       FROM flow_starts s JOIN limits l ON l.workflow_name = s.workflow_name
       WHERE l.rate_limit IS NOT NULL AND s.started_at > duraflow_clock_timestamp() - l.rate_period_ms * interval '1 millisecond'
       GROUP BY s.workflow_name, s.rate_key
     ), per_key AS (
       SELECT l.workflow_name, k.concurrency_key, k.waiting,
              COALESCE(r.running, 0) AS running, COALESCE(s.started, 0) AS started,
              l.key_concurrency, l.rate_limit, l.rate_per_key
       FROM limits l
       JOIN pending k ON k.workflow_name = l.workflow_name
       LEFT JOIN running r ON r.workflow_name = l.workflow_name AND r.concurrency_key = k.concurrency_key
       LEFT JOIN starts s ON s.workflow_name = l.workflow_name AND s.rate_key = k.concurrency_key AND l.rate_per_key
     ), rows AS (
       SELECT l.workflow_name AS workflow, NULL::varchar AS key, 'concurrency' AS kind,
              (SELECT COALESCE(sum(running), 0) FROM running r WHERE r.workflow_name = l.workflow_name)::int AS running,
              l.concurrency AS "limit",
              (SELECT COALESCE(sum(waiting), 0) FROM pending p WHERE p.workflow_name = l.workflow_name)::int AS waiting,
              0 AS rank
       FROM limits l WHERE l.concurrency IS NOT NULL
       UNION ALL
       SELECT l.workflow_name, NULL, 'rateLimit',
              (SELECT COALESCE(sum(started), 0) FROM starts s WHERE s.workflow_name = l.workflow_name AND s.rate_key = '')::int,
              l.rate_limit,
              (SELECT COALESCE(sum(waiting), 0) FROM pending p WHERE p.workflow_name = l.workflow_name)::int,
              1
       FROM limits l WHERE l.rate_limit IS NOT NULL AND NOT l.rate_per_key
       UNION ALL
       SELECT workflow_name, concurrency_key, kind, used, lim, waiting, 2 FROM (
         SELECT k.workflow_name, k.concurrency_key, c.kind, c.used, c.lim, k.waiting,
                row_number() OVER (PARTITION BY k.workflow_name ORDER BY k.waiting DESC, k.concurrency_key) AS n
         FROM per_key k
         CROSS JOIN LATERAL (VALUES
           ('keyConcurrency', k.running, k.key_concurrency),
           ('rateLimit', k.started, CASE WHEN k.rate_per_key THEN k.rate_limit END)
         ) AS c(kind, used, lim)
         WHERE c.lim IS NOT NULL AND c.used >= c.lim
       ) AS at_limit
       WHERE n <= ${KEYS_LISTED}
     )
     SELECT workflow, key, kind, running, "limit", waiting FROM rows ORDER BY workflow, rank, waiting DESC, key`;
