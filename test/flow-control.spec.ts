import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { FlowLimitStats, ReaperService, WorkflowService } from '@duraflow/nestjs';
import { statusCommand } from '../libs/duraflow/src/cli/status.command';
import { FLOW_RUNS_SQL, FLOW_WORKFLOW, FlowRunInput, FlowRunLimits, flowRunWorkflow } from './fixtures/flow/flow-workflows';
import type { FlowWorkerConfig } from './fixtures/flow/worker-main';
import { SUBMIT_ONLY, useTestBed } from './support/test-bed';
import { eventually, sleep } from './support/waiting';
import { WorkerDuraflowOptions } from './support/worker-ipc';
import { stopAllWorkerProcesses, withWorkerOutputOnFailure, WorkerProcess } from './support/worker-process';

/*
 * Flow control across worker processes, on real PostgreSQL. Each run of `flow-run` records when
 * it started and ended (flow_runs, written past the library); the concurrency a limit allowed is
 * computed from those times. A run's recorded interval lies inside the time its task was
 * `running` (it starts after the claim and ends before the completion commits), so the highest
 * concurrency of the recorded runs can only undercount what the database saw, never overcount:
 * over the limit there means the claim overshot.
 */

const ENTRY = path.join(__dirname, 'fixtures', 'flow', 'worker-main.ts');

describe('Flow control across worker processes', () => {
  const bed = useTestBed({ databasePerTest: true });
  let workflows: WorkflowService;
  let reaper: ReaperService;
  let limits: FlowRunLimits;

  /** The control app (submit-only, same definition as the workers) and the flow_runs table. */
  async function setUp(flowLimits: FlowRunLimits): Promise<void> {
    limits = flowLimits;
    await bed.db.client.query(FLOW_RUNS_SQL);
    const app = await bed.start({
      duraflow: { ...SUBMIT_ONLY, reaper: { enabled: false, staleAfterMs: 1_000 }, workflows: [flowRunWorkflow(limits, null)] },
    });
    workflows = app.get(WorkflowService);
    reaper = app.get(ReaperService);
    bed.closeLater({ close: stopAllWorkerProcesses });
  }

  function startWorker(label: string, duraflow: Partial<WorkerDuraflowOptions> = {}): WorkerProcess {
    const config: FlowWorkerConfig = {
      databaseUrl: bed.db.url,
      limits,
      duraflow: {
        heartbeatIntervalMs: 100,
        ...duraflow,
        worker: { concurrency: 10, pollIntervalMs: 100, shutdownTimeoutMs: 1_000, ...duraflow.worker },
        reaper: { enabled: false, staleAfterMs: 1_000, ...duraflow.reaper },
        workerId: `flow-${label}-${randomBytes(4).toString('hex')}`,
      },
    };
    return new WorkerProcess({ entry: ENTRY, config, label });
  }

  async function startWorkers(labels: string[], duraflow: Partial<WorkerDuraflowOptions> = {}): Promise<WorkerProcess[]> {
    const workers = labels.map((label) => startWorker(label, duraflow));
    await Promise.all(workers.map((worker) => worker.ready));
    return workers;
  }

  async function submitAll(inputs: FlowRunInput[]): Promise<void> {
    for (let i = 0; i < inputs.length; i += 1_000) await workflows.submitMany(FLOW_WORKFLOW, inputs.slice(i, i + 1_000));
  }

  async function completed(): Promise<number> {
    return bed.rows.count('agent_tasks', `status = 'completed'`);
  }

  async function allCompleted(total: number, timeoutMs = 60_000): Promise<void> {
    await eventually(`all ${total} tasks are completed`, async () => (await completed()) === total, { timeoutMs, everyMs: 100 });
  }

  /**
   * The highest number of recorded runs in progress at once (per key with `perKey`): the most
   * runs whose interval holds some run's start. A run with no end yet counts as still running.
   */
  async function highestConcurrency(perKey = false): Promise<number> {
    const { rows } = await bed.db.client.query<{ highest: number | null }>(
      `SELECT max((SELECT count(*) FROM flow_runs o
                   WHERE o.started_at <= r.started_at AND (o.ended_at IS NULL OR o.ended_at > r.started_at)
                     AND (NOT $1 OR o.key IS NOT DISTINCT FROM r.key)))::int AS highest
       FROM flow_runs r`,
      [perKey],
    );
    return rows[0].highest ?? 0;
  }

  /**
   * The same over the tasks' own times in agent_tasks: from `started_at` (the claim's time, taken
   * under the workflow's lock) to `completed_at` (the completion's transaction start, before it
   * commits and frees the slot): inside the time each task held its slot as the claims saw it.
   */
  async function highestConcurrencyOfTasks(perKey = false): Promise<number> {
    const { rows } = await bed.db.client.query<{ highest: number | null }>(
      `SELECT max((SELECT count(*) FROM agent_tasks o
                   WHERE o.started_at <= r.started_at AND (o.completed_at IS NULL OR o.completed_at > r.started_at)
                     AND (NOT $1 OR o.concurrency_key IS NOT DISTINCT FROM r.concurrency_key)))::int AS highest
       FROM agent_tasks r WHERE r.started_at IS NOT NULL`,
      [perKey],
    );
    return rows[0].highest ?? 0;
  }

  it(
    'never runs more than `concurrency` tasks of the workflow across three busy worker processes, and reaches it',
    withWorkerOutputOnFailure(async () => {
      await setUp({ concurrency: 3 });
      // All three ready before the tasks arrive: on a loaded machine the first two once drained the
      // sixty before the third had booted.
      await startWorkers(['A', 'B', 'C']);
      await submitAll(Array.from({ length: 60 }, () => ({ ms: 40 })));
      await allCompleted(60);

      expect(await highestConcurrency()).toBe(3);
      const { rows } = await bed.db.client.query(`SELECT count(*)::int AS runs, count(DISTINCT worker_id)::int AS workers FROM flow_runs`);
      expect(rows).toEqual([{ runs: 60, workers: 3 }]);
      // Held back is not failed: no retry was counted for a task that waited on the limit.
      expect(await bed.rows.count('agent_tasks', 'retry_count > 0')).toBe(0);
    }),
    120_000,
  );

  it(
    'holds a workflow limit and a per-key limit together with ten worker processes claiming at once',
    withWorkerOutputOnFailure(async () => {
      await setUp({ concurrency: 4, keyed: true, keyConcurrency: 1 });
      const workers = await startWorkers(
        Array.from({ length: 10 }, (_, i) => `W${i}`),
        { worker: { concurrency: 5, pollIntervalMs: 100, shutdownTimeoutMs: 1_000 } },
      );
      // Every worker is idle and listening: one commit wakes all ten at once. The runs record
      // nothing (ten processes on a shared server: as few connections as can be), so the
      // concurrency is read from the tasks' own claim and completion times.
      await submitAll(Array.from({ length: 60 }, (_, i) => ({ key: `k${i % 6}`, ms: 20, record: false })));
      await allCompleted(60, 90_000);

      expect(await highestConcurrencyOfTasks()).toBeLessThanOrEqual(4);
      expect(await highestConcurrencyOfTasks(true)).toBe(1);
      expect(await bed.rows.count('agent_tasks', 'retry_count > 0')).toBe(0);
      expect(workers.every((worker) => worker.alive)).toBe(true);
    }),
    180_000,
  );

  it(
    'lets two keys progress side by side, each at its own keyConcurrency',
    withWorkerOutputOnFailure(async () => {
      await setUp({ keyed: true, keyConcurrency: 2 });
      // Key x's whole backlog first, then y's: in the claim order alone, y would wait for all of x.
      await submitAll([
        ...Array.from({ length: 30 }, () => ({ key: 'x', ms: 30 })),
        ...Array.from({ length: 30 }, () => ({ key: 'y', ms: 30 })),
      ]);
      await startWorkers(['A', 'B']);
      await allCompleted(60);

      expect(await highestConcurrency(true)).toBe(2);
      expect(await highestConcurrency()).toBeLessThanOrEqual(4);
      // Both progressed from the start: among the first ten runs each key has several.
      const { rows } = await bed.db.client.query<{ key: string; n: number }>(
        `SELECT key, count(*)::int AS n FROM (SELECT key FROM flow_runs ORDER BY started_at LIMIT 10) AS first GROUP BY key ORDER BY key`,
      );
      expect(rows.map((row) => row.key)).toEqual(['x', 'y']);
      for (const row of rows) expect(row.n).toBeGreaterThanOrEqual(3);
    }),
    120_000,
  );

  it(
    'starts a one-task key within the first claim batches behind a backlog of 5,000 tasks of another key',
    withWorkerOutputOnFailure(async () => {
      await setUp({ keyed: true, concurrency: 10 });
      await submitAll(Array.from({ length: 5_000 }, () => ({ key: 'big', ms: 5 })));
      await workflows.submit(FLOW_WORKFLOW, { key: 'small', ms: 5 });
      // One process, concurrency 10: a claim takes at most 10 (the workflow's limit).
      await startWorkers(['A']);
      await eventually(
        'the small key ran',
        async () => (await bed.rows.count('agent_tasks', `concurrency_key = 'small' AND status = 'completed'`)) === 1,
      );

      const { rows } = await bed.db.client.query<{ before: number }>(
        `SELECT count(*)::int AS before FROM flow_runs
         WHERE key = 'big' AND started_at < (SELECT started_at FROM flow_runs WHERE key = 'small')`,
      );
      // The first claim takes a batch of the big key (it comes first in key order); the next
      // claim visits the small key first. 20 = two batches of the limit.
      expect(rows[0].before).toBeLessThanOrEqual(20);
    }),
    120_000,
  );

  it(
    'never lets a window of periodMs hold more than `limit` starts, across two worker processes',
    withWorkerOutputOnFailure(async () => {
      await setUp({ rateLimit: { limit: 3, periodMs: 600 } });
      await submitAll(Array.from({ length: 12 }, () => ({ ms: 1 })));
      await startWorkers(['A', 'B']);
      await allCompleted(12);

      // started_at is the claim's own time (taken under the workflow's lock): any window of
      // 600 ms holds at most 3 starts iff every 4th start is at least 600 ms after the 1st.
      const { rows } = await bed.db.client.query<{ gap_ms: number }>(
        `SELECT (EXTRACT(EPOCH FROM lead(started_at, 3) OVER (ORDER BY started_at) - started_at) * 1000)::float8 AS gap_ms
         FROM agent_tasks`,
      );
      const gaps = rows.map((row) => row.gap_ms).filter((gap) => gap !== null);
      expect(gaps).toHaveLength(9);
      for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(600);
    }),
    120_000,
  );

  it(
    'applies a per-key rate limit to each key on its own',
    withWorkerOutputOnFailure(async () => {
      await setUp({ keyed: true, rateLimit: { limit: 2, periodMs: 500, perKey: true } });
      await submitAll(['p', 'q'].flatMap((key) => Array.from({ length: 6 }, () => ({ key, ms: 1 }))));
      await startWorkers(['A', 'B']);
      await allCompleted(12);

      const { rows } = await bed.db.client.query<{ key: string; gap_ms: number }>(
        `SELECT concurrency_key AS key,
                (EXTRACT(EPOCH FROM lead(started_at, 2) OVER (PARTITION BY concurrency_key ORDER BY started_at) - started_at) * 1000)::float8 AS gap_ms
         FROM agent_tasks`,
      );
      const gaps = rows.filter((row) => row.gap_ms !== null);
      expect(gaps.filter((row) => row.key === 'p')).toHaveLength(4);
      expect(gaps.filter((row) => row.key === 'q')).toHaveLength(4);
      for (const { gap_ms } of gaps) expect(gap_ms).toBeGreaterThanOrEqual(500);
      // The keys do not share a window: two starts of each within the first 500 ms.
      const { rows: first } = await bed.db.client.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM agent_tasks WHERE started_at < (SELECT min(started_at) FROM agent_tasks) + interval '500 milliseconds'`,
      );
      expect(first[0].n).toBe(4);
    }),
    120_000,
  );

  it(
    'keeps the limit while a SIGKILLed worker’s tasks are stale, and frees their slots when they are reaped',
    withWorkerOutputOnFailure(async () => {
      await setUp({ concurrency: 2 });
      const [victim] = await startWorkers(['victim']);
      await submitAll([
        { ms: 50, hangOnFirstAttempt: true },
        { ms: 50, hangOnFirstAttempt: true },
      ]);
      await eventually('the victim runs both hanging tasks', async () => (await bed.rows.count('agent_tasks', `status = 'running'`)) === 2);
      const [survivor] = await startWorkers(['survivor']);
      await submitAll(Array.from({ length: 6 }, () => ({ ms: 30 })));
      victim.kill('SIGKILL');
      await victim.exited;

      // The dead worker's tasks are still `running` (nobody reaped them): they hold both slots.
      await eventually(
        'the dead worker’s tasks are stale',
        async () => (await bed.rows.count('agent_tasks', `status = 'running' AND heartbeat_at < now() - interval '1 second'`)) === 2,
      );
      await sleep(300); // three of the survivor's polls
      const { rows: during } = await bed.db.client.query(`SELECT count(*)::int AS n FROM flow_runs WHERE worker_id = $1`, [
        survivor.workerId,
      ]);
      expect(during).toEqual([{ n: 0 }]);
      expect(await bed.rows.count('agent_tasks', `status = 'pending'`)).toBe(6);

      const reaped = await bed.db.client.query<{ at: Date }>(`SELECT clock_timestamp() AS at`);
      const result = await reaper.reapOnce();
      expect(result.requeued).toHaveLength(2);
      // The killed runs ended, for the limit, when they were reaped.
      await bed.db.client.query(`UPDATE flow_runs SET ended_at = $1 WHERE ended_at IS NULL AND worker_id = $2`, [
        reaped.rows[0].at,
        victim.workerId,
      ]);
      await allCompleted(8);

      expect(await highestConcurrency()).toBe(2);
      const { rows } = await bed.db.client.query(`SELECT count(*)::int AS n FROM flow_runs WHERE worker_id = $1`, [survivor.workerId]);
      expect(rows).toEqual([{ n: 8 }]);
    }),
    120_000,
  );

  it(
    'shows what waits on which limit in worker.stats(), readLimits() and `duraflow status`',
    withWorkerOutputOnFailure(async () => {
      await setUp({ concurrency: 2, keyed: true, keyConcurrency: 1, rateLimit: { limit: 1_000, periodMs: 60_000 } });
      await submitAll([
        ...Array.from({ length: 5 }, () => ({ key: 'a', ms: 600_000 })),
        ...Array.from({ length: 3 }, () => ({ key: 'b', ms: 600_000 })),
      ]);
      const [worker] = await startWorkers(['A']);
      await eventually('two runs hold the two slots', async () => (await bed.rows.count('agent_tasks', `status = 'running'`)) === 2);

      const read = await worker.call<FlowLimitStats[]>('WorkerService', 'readLimits');
      expect(read).toEqual([
        { workflow: FLOW_WORKFLOW, kind: 'concurrency', running: 2, limit: 2, waiting: 6 },
        { workflow: FLOW_WORKFLOW, kind: 'rateLimit', running: 2, limit: 1_000, waiting: 6 },
        { workflow: FLOW_WORKFLOW, key: 'a', kind: 'keyConcurrency', running: 1, limit: 1, waiting: 4 },
        { workflow: FLOW_WORKFLOW, key: 'b', kind: 'keyConcurrency', running: 1, limit: 1, waiting: 2 },
      ]);
      const stats = await worker.call<{ limits: FlowLimitStats[] }>('WorkerService', 'stats');
      expect(stats.limits).toEqual(read);

      // `npx duraflow status`: the same, read from the database alone.
      const lines: string[] = [];
      const report = await statusCommand({ url: bed.db.url, json: false }, (line) => lines.push(line));
      expect(report.limits).toEqual(read);
      const table = lines.slice(lines.findIndex((line) => line.startsWith('Flow limits')));
      expect(table.slice(1, 6).map((line) => line.trim().split(/\s+/))).toEqual([
        ['workflow', 'key', 'limit', 'running', 'pending'],
        [FLOW_WORKFLOW, 'concurrency', '2/2', '6'],
        [FLOW_WORKFLOW, 'rateLimit', '2/1000', '6'],
        [FLOW_WORKFLOW, 'a', 'keyConcurrency', '1/1', '4'],
        [FLOW_WORKFLOW, 'b', 'keyConcurrency', '1/1', '2'],
      ]);
    }),
    60_000,
  );
});
