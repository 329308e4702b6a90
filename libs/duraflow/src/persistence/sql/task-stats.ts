import {
  OVERVIEW_WINDOWS,
  OverviewInterval,
  OverviewWindow,
  TaskOutcomeCounts,
  TaskOverview,
  WorkflowOverview,
} from '../../domain/task-overview';
import type { SqlExecutor } from '../duraflow-database';
import { runnable, runnableSince } from '../lifecycle/task-lifecycle';

/**
 * Durations are counted in buckets of ratio 2^(1/4): bucket b (1..128) holds [2^((b-1)/4),
 * 2^(b/4)) ms (under 1 ms in bucket 1, over about 50 days in bucket 128). A histogram is a JSON
 * object bucket -> tasks, so hours and workflows add up by adding their counts.
 */
export type DurationHistogram = Record<string, number>;

const BUCKETS_PER_DOUBLING = 4;
const LAST_BUCKET = 128;
const HOUR_MS = 3_600_000;
const SLOT_MS = 5 * 60_000;
/** The rollup adds an hour this long after it ended: a transaction that began in it has committed by then. */
const ROLLUP_GRACE_MS = 2 * 60_000;
/** At most this many hours per rollup statement, so a first run over a busy week is a few short statements. */
const ROLLUP_HOURS_PER_STATEMENT = 24;
/** How far back the rollup starts on its first run, and how long it keeps an hour. */
const ROLLUP_KEEPS_MS = 8 * 24 * HOUR_MS;

/** The bucket of a finished task's duration, in SQL (null for a task that never started or was cancelled). */
const DURATION_BUCKET = `CASE WHEN started_at IS NOT NULL AND status <> 'cancelled' THEN
    LEAST(${LAST_BUCKET}, GREATEST(1, floor(${BUCKETS_PER_DOUBLING} * ln(GREATEST(1, date_part('epoch', completed_at - started_at) * 1000)) / ln(2))::int + 1))
  END`;

/**
 * Per slot of `$3` seconds and workflow, the tasks created and finished in [$1, $2). Two range
 * scans: idx_agent_tasks_created for the created ones, idx_agent_tasks_completed for the finished.
 */
const TASK_STATS = `WITH ended AS (
    SELECT floor(date_part('epoch', completed_at) / $3)::bigint AS slot, workflow_name, status, ${DURATION_BUCKET} AS bucket
    FROM agent_tasks WHERE completed_at >= $1 AND completed_at < $2
  ), parts AS (
    SELECT floor(date_part('epoch', created_at) / $3)::bigint AS slot, workflow_name, count(*)::int AS started,
           0 AS completed, 0 AS failed, 0 AS rolled_back, 0 AS cancelled, NULL::jsonb AS durations
    FROM agent_tasks WHERE created_at >= $1 AND created_at < $2
    GROUP BY 1, 2
    UNION ALL
    SELECT slot, workflow_name, 0,
           count(*) FILTER (WHERE status = 'completed')::int,
           count(*) FILTER (WHERE status IN ('failed', 'partial_rollback'))::int,
           count(*) FILTER (WHERE status = 'rolled_back')::int,
           count(*) FILTER (WHERE status = 'cancelled')::int,
           NULL
    FROM ended GROUP BY 1, 2
    UNION ALL
    SELECT slot, workflow_name, 0, 0, 0, 0, 0, jsonb_object_agg(bucket, n)
    FROM (SELECT slot, workflow_name, bucket, count(*)::int AS n FROM ended WHERE bucket IS NOT NULL GROUP BY 1, 2, 3) AS b
    GROUP BY 1, 2
  )
  -- Summed by grouping, never joined: the three parts meet on (slot, workflow) in one hash aggregate.
  SELECT slot, workflow_name, sum(started)::int AS started, sum(completed)::int AS completed, sum(failed)::int AS failed,
         sum(rolled_back)::int AS rolled_back, sum(cancelled)::int AS cancelled,
         COALESCE((array_agg(durations) FILTER (WHERE durations IS NOT NULL))[1], '{}'::jsonb) AS durations
  FROM parts GROUP BY slot, workflow_name`;

/** Per workflow, the queue now: the unfinished tasks only (idx_agent_tasks_status_created), so it grows with the backlog, not the table. */
const QUEUE_NOW = `SELECT workflow_name,
         count(*) FILTER (WHERE ${runnable('t')})::int AS queue,
         count(*) FILTER (WHERE t.status = 'running')::int AS running,
         min(${runnableSince('t')}) FILTER (WHERE ${runnable('t')}) AS oldest
  FROM agent_tasks t WHERE t.status IN ('pending', 'running') AND t.deleted_at IS NULL
  GROUP BY 1`;

interface StatsRow {
  /** Start of the slot, in ms since the epoch. */
  at: number;
  workflow_name: string;
  started: number;
  completed: number;
  failed: number;
  rolled_back: number;
  cancelled: number;
  durations: DurationHistogram;
}

/** The end of the last hour the rollup may add at `now` (ms since the epoch): nothing new to roll before the next one. */
export function lastClosedHour(now: Date): number {
  return floorTo(now.getTime() - ROLLUP_GRACE_MS, HOUR_MS);
}

/**
 * Adds the hours that ended since the last run to `duraflow_task_rollup` (at most 24 per call;
 * the reaper's leader calls it again while it returns true), and prunes hours older than 8 days.
 * The state row is locked for the call: two nodes never add the same hour twice.
 */
export async function rollUpTaskStats(executor: SqlExecutor, now = new Date()): Promise<{ rolledUntil: Date; more: boolean }> {
  const closed = lastClosedHour(now);
  await executor.query(`INSERT INTO duraflow_task_rollup_state (id, rolled_until) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`, [
    new Date(floorTo(now.getTime() - ROLLUP_KEEPS_MS, HOUR_MS)),
  ]);
  const { rows } = await executor.query<{ rolled_until: Date }>(
    `SELECT rolled_until FROM duraflow_task_rollup_state WHERE id = 1 FOR UPDATE`,
  );
  const from = rows[0].rolled_until.getTime();
  const to = Math.min(closed, from + ROLLUP_HOURS_PER_STATEMENT * HOUR_MS);
  if (to <= from) return { rolledUntil: new Date(from), more: false };
  await executor.query(
    `WITH stats AS (${TASK_STATS})
     INSERT INTO duraflow_task_rollup AS r (hour, workflow_name, started, completed, failed, rolled_back, cancelled, durations)
     SELECT to_timestamp(slot * 3600), workflow_name, started, completed, failed, rolled_back, cancelled, durations FROM stats
     ON CONFLICT (hour, workflow_name) DO UPDATE SET started = EXCLUDED.started, completed = EXCLUDED.completed,
       failed = EXCLUDED.failed, rolled_back = EXCLUDED.rolled_back, cancelled = EXCLUDED.cancelled, durations = EXCLUDED.durations`,
    [new Date(from), new Date(to), HOUR_MS / 1000],
    'duraflow_roll_up_task_stats',
  );
  await executor.query(
    `WITH pruned AS (DELETE FROM duraflow_task_rollup WHERE hour < $2)
     UPDATE duraflow_task_rollup_state SET rolled_until = $1 WHERE id = 1`,
    [new Date(to), new Date(floorTo(now.getTime() - ROLLUP_KEEPS_MS, HOUR_MS))],
  );
  return { rolledUntil: new Date(to), more: to < closed };
}

/**
 * The overview of `window` up to `now`: the rollup's hours before `rolled_until`, the tasks
 * themselves after it (the hour window is read from the tasks alone, in 5-minute slots), and the
 * queue now from the unfinished tasks (the partial indexes on pending and running tasks).
 */
export async function readTaskOverview(executor: SqlExecutor, window: OverviewWindow, now = new Date()): Promise<TaskOverview> {
  const { intervals, intervalMs } = OVERVIEW_WINDOWS[window];
  const to = now.getTime();
  const from = floorTo(to, intervalMs) - (intervals - 1) * intervalMs;
  const state = await executor.query<{ rolled_until: Date }>(`SELECT rolled_until FROM duraflow_task_rollup_state WHERE id = 1`);
  const rolledUntil = state.rows[0]?.rolled_until ?? null;
  const rawFrom = window === 'hour' ? from : Math.max(from, Math.min(rolledUntil?.getTime() ?? from, floorTo(to, HOUR_MS)));
  // Three independent reads: on a pool they run at once, each on its own connection.
  const [rolled, raw, queue] = await Promise.all([
    rawFrom > from
      ? executor.query<Omit<StatsRow, 'at'> & { hour: Date }>(
          `SELECT hour, workflow_name, started, completed, failed, rolled_back, cancelled, durations
           FROM duraflow_task_rollup WHERE hour >= $1 AND hour < $2`,
          [new Date(from), new Date(rawFrom)],
          'duraflow_read_task_rollup',
        )
      : { rows: [] },
    executor.query<Omit<StatsRow, 'at'> & { slot: string }>(
      TASK_STATS,
      [new Date(rawFrom), new Date(to + 1), SLOT_MS / 1000],
      'duraflow_read_task_stats',
    ),
    executor.query<{ workflow_name: string; queue: number; running: number; oldest: Date | null }>(
      QUEUE_NOW,
      [],
      'duraflow_read_queue_depth',
    ),
  ]);
  const rows: StatsRow[] = [
    ...rolled.rows.map((row) => ({ ...row, at: row.hour.getTime() })),
    ...raw.rows.map((row) => ({ ...row, at: Number(row.slot) * SLOT_MS })),
  ];
  const byWorkflow = groupByWorkflow(rows);
  const names = [...new Set([...byWorkflow.keys(), ...queue.rows.map((row) => row.workflow_name)])].sort();
  const series = (name: string | null): WorkflowOverview => {
    const mine = name === null ? rows : (byWorkflow.get(name) ?? []);
    const queued = name === null ? queue.rows : queue.rows.filter((row) => row.workflow_name === name);
    const oldest = queued.map((row) => row.oldest?.getTime()).filter((time): time is number => time !== undefined);
    return {
      workflow: name,
      ...summarize(mine, from, intervals, intervalMs),
      queueDepth: queued.reduce((sum, row) => sum + row.queue, 0),
      running: queued.reduce((sum, row) => sum + row.running, 0),
      oldestRunnableMs: oldest.length ? Math.max(0, to - Math.min(...oldest)) : null,
    };
  };
  return {
    window,
    from: new Date(from),
    to: now,
    intervalMs,
    overall: series(null),
    workflows: names.map(series),
    rolledUntil,
  };
}

function summarize(rows: StatsRow[], from: number, intervals: number, intervalMs: number): Pick<WorkflowOverview, 'intervals' | 'totals'> {
  // Histograms as arrays indexed by bucket: a row's counts are added in one tight loop per target.
  const buckets = Array.from({ length: intervals }, (_, index) => ({
    counts: zeroCounts(),
    durations: new Float64Array(LAST_BUCKET + 1),
    start: from + index * intervalMs,
  }));
  const all = { counts: zeroCounts(), durations: new Float64Array(LAST_BUCKET + 1) };
  for (const row of rows) {
    const bucket = buckets[Math.floor((row.at - from) / intervalMs)];
    if (!bucket) continue;
    addCounts(bucket.counts, row);
    addCounts(all.counts, row);
    for (const key in row.durations) {
      const count = Number(row.durations[key]);
      bucket.durations[Number(key)] += count;
      all.durations[Number(key)] += count;
    }
  }
  const intervalsOut: OverviewInterval[] = buckets.map((bucket) => ({
    ...bucket.counts,
    start: new Date(bucket.start),
    end: new Date(bucket.start + intervalMs),
    p50Ms: quantileOf(bucket.durations, 0.5),
    p95Ms: quantileOf(bucket.durations, 0.95),
  }));
  const { completed, failed, rolledBack } = all.counts;
  const ended = completed + failed + rolledBack;
  return {
    intervals: intervalsOut,
    totals: {
      ...all.counts,
      failureRate: ended ? (failed + rolledBack) / ended : null,
      p50Ms: quantileOf(all.durations, 0.5),
      p95Ms: quantileOf(all.durations, 0.95),
    },
  };
}

/** The `q` quantile of a histogram (index: bucket): the geometric middle of the bucket that holds it; null when it is empty. */
function quantileOf(counts: Float64Array, q: number): number | null {
  let total = 0;
  for (let bucket = 1; bucket <= LAST_BUCKET; bucket++) total += counts[bucket];
  if (!total) return null;
  const rank = Math.max(1, Math.ceil(q * total));
  let seen = 0;
  for (let bucket = 1; bucket <= LAST_BUCKET; bucket++) {
    seen += counts[bucket];
    if (seen >= rank) return Math.round(2 ** ((bucket - 0.5) / BUCKETS_PER_DOUBLING) * 10) / 10;
  }
  return null;
}

function groupByWorkflow(rows: StatsRow[]): Map<string, StatsRow[]> {
  const byWorkflow = new Map<string, StatsRow[]>();
  for (const row of rows) {
    const list = byWorkflow.get(row.workflow_name);
    if (list) list.push(row);
    else byWorkflow.set(row.workflow_name, [row]);
  }
  return byWorkflow;
}

function zeroCounts(): TaskOutcomeCounts {
  return { started: 0, completed: 0, failed: 0, rolledBack: 0, cancelled: 0 };
}

function addCounts(counts: TaskOutcomeCounts, row: StatsRow): void {
  counts.started += row.started;
  counts.completed += row.completed;
  counts.failed += row.failed;
  counts.rolledBack += row.rolled_back;
  counts.cancelled += row.cancelled;
}

function floorTo(time: number, unit: number): number {
  return Math.floor(time / unit) * unit;
}
