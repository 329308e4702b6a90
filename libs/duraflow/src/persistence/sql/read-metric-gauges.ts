import type { SqlExecutor } from '../duraflow-database';

/** What the Prometheus gauges show at a scrape. */
export interface MetricGauges {
  /** Pending and running tasks by workflow. */
  tasks: Array<{ workflowName: string; status: 'pending' | 'running'; count: number }>;
  /** By workflow: how long its oldest runnable pending task has waited (since created, or since its `scheduled_at`). */
  oldestPendingSeconds: Array<{ workflowName: string; seconds: number }>;
  /** Open dead letters by workflow (null: an entry whose task is gone). */
  deadLetters: Array<{ workflowName: string | null; count: number }>;
}

/**
 * The gauges, in one statement run at scrape time (never per event). It reads only unfinished
 * tasks — the partial indexes on pending and on running tasks hold exactly those — and the
 * dead-letter queue, so it stays cheap however many finished tasks the table keeps; finished
 * tasks are counted by the `tasks_finished_total` counter instead.
 */
export async function readMetricGauges(executor: SqlExecutor): Promise<MetricGauges> {
  const { rows } = await executor.query<{ kind: string; workflow_name: string | null; status: string | null; value: number }>(
    `SELECT 'tasks' AS kind, workflow_name, status, count(*)::float8 AS value
     FROM agent_tasks
     WHERE status IN ('pending', 'running') AND deleted_at IS NULL
     GROUP BY workflow_name, status
     UNION ALL
     SELECT 'oldest_pending', workflow_name, NULL,
            EXTRACT(EPOCH FROM duraflow_now() - min(GREATEST(created_at, COALESCE(scheduled_at, created_at))))::float8
     FROM agent_tasks
     WHERE status = 'pending' AND deleted_at IS NULL AND (scheduled_at IS NULL OR scheduled_at <= duraflow_now())
     GROUP BY workflow_name
     UNION ALL
     SELECT 'dead_letters', t.workflow_name, NULL, count(*)::float8
     FROM dead_letter_queue d LEFT JOIN agent_tasks t ON t.id = d.task_id
     GROUP BY t.workflow_name`,
    [],
    'duraflow_read_metric_gauges',
  );
  const gauges: MetricGauges = { tasks: [], oldestPendingSeconds: [], deadLetters: [] };
  for (const row of rows) {
    if (row.kind === 'tasks') {
      gauges.tasks.push({ workflowName: row.workflow_name!, status: row.status as 'pending' | 'running', count: row.value });
    } else if (row.kind === 'oldest_pending') {
      gauges.oldestPendingSeconds.push({ workflowName: row.workflow_name!, seconds: Math.max(0, row.value) });
    } else {
      gauges.deadLetters.push({ workflowName: row.workflow_name, count: row.value });
    }
  }
  return gauges;
}
