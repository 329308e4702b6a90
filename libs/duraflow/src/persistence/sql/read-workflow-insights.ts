import { PATCH_MARKER_PREFIX } from '../../domain/reserved-keys';
import { WorkflowStepStats, WorkflowSubscription } from '../../domain/task-overview';
import type { SqlExecutor } from '../duraflow-database';
import { held } from '../lifecycle/task-lifecycle';

/** The unfinished tasks of one workflow per version, and the workers running them now. */
export interface UnfinishedVersion {
  version: number;
  pending: number;
  running: number;
  held: number;
  workers: string[];
}

/**
 * The steps the workflow's newest runs recorded (the newest `limit` tasks created since `since`,
 * walked on idx_agent_tasks_created, their steps by idx_step_runs_task_step): per step key its
 * rows, failures, retried ones and the p50/p95 of the completed ones' durations. Bounded by
 * `limit` tasks, however many the table holds.
 */
export async function readWorkflowStepStats(
  executor: SqlExecutor,
  workflow: string,
  since: Date,
  limit: number,
): Promise<WorkflowStepStats[]> {
  const { rows } = await executor.query<{
    step_key: string;
    kind: string | null;
    runs: number;
    failed: number;
    retried: number;
    p50: number | null;
    p95: number | null;
  }>(
    `WITH recent AS (
       SELECT id FROM agent_tasks WHERE workflow_name = $1 AND created_at >= $2 ORDER BY created_at DESC, id DESC LIMIT $3
     ), steps AS (
       SELECT s.step_key, s.kind, s.status, s.attempt, s.completion_seq,
              CASE WHEN s.status = 'completed' AND s.started_at IS NOT NULL AND s.completed_at IS NOT NULL
                   THEN extract(epoch FROM s.completed_at - s.started_at) * 1000 END AS ms
       FROM recent r JOIN step_runs s ON s.task_id = r.id
       WHERE s.step_key NOT LIKE '${PATCH_MARKER_PREFIX}%'
     )
     SELECT step_key, kind, count(*)::int AS runs,
            count(*) FILTER (WHERE status = 'failed')::int AS failed,
            count(*) FILTER (WHERE attempt > 1)::int AS retried,
            (percentile_cont(0.5) WITHIN GROUP (ORDER BY ms))::float8 AS p50,
            (percentile_cont(0.95) WITHIN GROUP (ORDER BY ms))::float8 AS p95
     FROM steps GROUP BY step_key, kind
     ORDER BY avg(completion_seq) NULLS LAST, step_key`,
    [workflow, since, limit],
    'duraflow_read_workflow_step_stats',
  );
  return rows.map((row) => ({
    stepKey: row.step_key,
    kind: row.kind,
    runs: row.runs,
    failed: row.failed,
    retried: row.retried,
    p50Ms: row.p50 === null ? null : Math.round(row.p50),
    p95Ms: row.p95 === null ? null : Math.round(row.p95),
  }));
}

/** The workflow's pending and running tasks by version (read-deploy-status.ts for one workflow), with their workers. */
export async function readUnfinishedVersions(executor: SqlExecutor, workflow: string): Promise<UnfinishedVersion[]> {
  const { rows } = await executor.query<{ version: number; pending: number; running: number; held: number; workers: string[] | null }>(
    `SELECT coalesce(workflow_version, 1) AS version,
            count(*) FILTER (WHERE status = 'pending' AND NOT ${held('agent_tasks')})::int AS pending,
            count(*) FILTER (WHERE status = 'running')::int AS running,
            count(*) FILTER (WHERE ${held('agent_tasks')})::int AS held,
            array_agg(DISTINCT worker_id) FILTER (WHERE status = 'running' AND worker_id IS NOT NULL) AS workers
     FROM agent_tasks WHERE workflow_name = $1 AND deleted_at IS NULL AND status IN ('pending', 'running')
     GROUP BY 1 ORDER BY 1`,
    [workflow],
    'duraflow_read_unfinished_versions',
  );
  return rows.map((row) => ({ ...row, workers: row.workers ?? [] }));
}

/** The events that start the workflow; none on a schema without event subscriptions (an older database). */
export async function readWorkflowSubscriptions(executor: SqlExecutor, workflow: string): Promise<WorkflowSubscription[]> {
  try {
    const { rows } = await executor.query<{
      event_name: string;
      mode: WorkflowSubscription['mode'];
      period_ms: number | null;
      max_wait_ms: number | null;
      max_size: number | null;
      timeout_ms: number | null;
    }>(
      `SELECT event_name, mode, period_ms, max_wait_ms, max_size, timeout_ms
       FROM duraflow_event_subscriptions WHERE workflow_name = $1 ORDER BY event_name`,
      [workflow],
    );
    return rows.map((row) => ({
      eventName: row.event_name,
      mode: row.mode,
      periodMs: row.period_ms,
      maxWaitMs: row.max_wait_ms,
      maxSize: row.max_size,
      timeoutMs: row.timeout_ms,
    }));
  } catch (error) {
    if ((error as { code?: unknown }).code === '42P01') return [];
    throw error;
  }
}
