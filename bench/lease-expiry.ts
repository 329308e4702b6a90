/**
 * Leases that expire (issue 14), under faults, measured with real processes (not asserted):
 * (a) the longest time with no reaper leader that can reap (a process that is not frozen and
 *     says it leads) while the PostgreSQL-elected leader is frozen with SIGSTOP for 5 s;
 * (b) the steps (and compensations) started by a process after it had lost its task: in the
 *     freeze rounds, a step body started by the woken leader for a task another worker had
 *     taken over by then; and, in rounds of their own, a worker whose event loop is blocked past
 *     staleAfterMs between two steps, or between two compensations (chaos-block).
 * Runs on whatever code the checkout has, so the same file measures before and after a change.
 *
 *   node -r ./test/support/swc-register.js bench/lease-expiry.ts [--rounds 3] [--freeze-ms 5000]
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { CHAOS_TABLES_SQL } from '../test/fixtures/chaos/effects';
import { ChaosWorkerConfig } from '../test/fixtures/chaos/protocol';
import { sleep } from '../test/support/waiting';
import { stopAllWorkerProcesses, WorkerProcess } from '../test/support/worker-process';
import { BenchDatabase, createBenchDatabase } from './database';
import { progress } from './stats';

const ENTRY = require.resolve('../test/fixtures/chaos/worker-main.ts');
const TIMINGS = { heartbeatIntervalMs: 100, staleAfterMs: 1_000, reaperIntervalMs: 200, leaderTtlMs: 1_000 };

function parseArgs(argv: string[]): { rounds: number; freezeMs: number } {
  const args = { rounds: 3, freezeMs: 5_000 };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--rounds') args.rounds = Number(argv[++i]);
    else if (argv[i] === '--freeze-ms') args.freezeMs = Number(argv[++i]);
    else throw new Error(`Unknown argument "${argv[i]}" (use --rounds n, --freeze-ms ms)`);
  }
  return args;
}

/**
 * A chaos worker process in PostgreSQL mode (no Redis), with the chaos tests' short intervals.
 * Concurrency 4 in the freeze rounds: no more step bodies than the effects pool (4 connections)
 * has connections, so an effect is sent as its body starts and never waits in the pool past a
 * freeze (it would then land after the takeover and read as a start after the loss).
 */
function startWorker(
  db: BenchDatabase,
  label: string,
  leaderKey: string,
  { concurrency = 4, worker = true, reaper = true }: { concurrency?: number; worker?: boolean; reaper?: boolean } = {},
): WorkerProcess {
  const config: ChaosWorkerConfig = {
    databaseUrl: db.url,
    scenarios: ['chaos-steps', 'chaos-block'],
    duraflow: {
      workerId: `lease-${label}-${randomBytes(3).toString('hex')}`,
      heartbeatIntervalMs: TIMINGS.heartbeatIntervalMs,
      worker: { enabled: worker, concurrency, pollIntervalMs: 100, shutdownTimeoutMs: 1_000 },
      reaper: {
        enabled: reaper,
        intervalMs: TIMINGS.reaperIntervalMs,
        staleAfterMs: TIMINGS.staleAfterMs,
        leaderTtlMs: TIMINGS.leaderTtlMs,
        leaderKey,
      },
    },
  };
  return new WorkerProcess({ entry: ENTRY, config, label });
}

const leads = (worker: WorkerProcess) =>
  worker.request<boolean>({ type: 'call', service: 'ReaperService', method: 'isLeader', args: [] }, 500).catch(() => false);

async function until(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`not ${what} after ${timeoutMs} ms`);
    await sleep(50);
  }
}

async function insertTasks(db: BenchDatabase, workflow: string, input: object, count: number): Promise<void> {
  await db.client.query(
    `INSERT INTO agent_tasks (workflow_name, input, max_retries) SELECT $1, $2::jsonb, 5 FROM generate_series(1, $3::int)`,
    [workflow, JSON.stringify(input), count],
  );
}

const allTerminal = async (db: BenchDatabase) =>
  (await db.client.query(`SELECT 1 FROM agent_tasks WHERE status IN ('pending', 'running') LIMIT 1`)).rowCount === 0;

/** Effects (step bodies started) by `workerId` for a task on which another worker had recorded an effect before. */
async function startsAfterTakeover(db: BenchDatabase, workerId: string): Promise<number> {
  const { rows } = await db.client.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM chaos_effects e
     WHERE e.worker_id = $1
       AND EXISTS (SELECT 1 FROM chaos_effects o WHERE o.task_id = e.task_id AND o.worker_id <> $1 AND o.id < e.id)`,
    [workerId],
  );
  return rows[0].n;
}

interface FreezeRound {
  gapMs: number;
  startsAfterLoss: number;
}

/** One round: freeze the leader (or the follower) for `freezeMs` while it runs tasks; watch who can reap. */
async function freezeRound(
  db: BenchDatabase,
  workers: WorkerProcess[],
  freezeMs: number,
  target: 'leader' | 'follower',
): Promise<FreezeRound> {
  await until('a leader', async () => (await Promise.all(workers.map(leads))).some(Boolean), 15_000);
  const leading = (await leads(workers[0])) ? 0 : 1;
  const leader = workers[target === 'leader' ? leading : 1 - leading];
  await db.client.query('TRUNCATE agent_tasks, step_runs, dead_letter_queue, chaos_effects, chaos_compensations');
  // More than one process's concurrency: both hold some, the leader among them.
  await insertTasks(db, 'chaos-steps', { steps: 200, stepMs: 20 }, 16);
  await until(
    'the leader runs a task',
    async () =>
      (await db.client.query(`SELECT 1 FROM agent_tasks WHERE status = 'running' AND worker_id = $1`, [leader.workerId])).rowCount! > 0,
    10_000,
  );
  await sleep(300);

  let frozen = true;
  let monitoring = true;
  let lastLed = performance.now();
  let gapMs = 0;
  const monitor = (async () => {
    while (monitoring) {
      const awake = workers.filter((worker) => !(frozen && worker === leader));
      const anyLeads = (await Promise.all(awake.map(leads))).some(Boolean);
      const now = performance.now();
      if (anyLeads) lastLed = now;
      else gapMs = Math.max(gapMs, now - lastLed);
      await sleep(20);
    }
  })();
  leader.kill('SIGSTOP');
  lastLed = performance.now(); // the frozen leader could reap no more from here
  await sleep(freezeMs);
  leader.kill('SIGCONT');
  frozen = false;
  await sleep(3_000);
  monitoring = false;
  await monitor;
  await until('every task finished', () => allTerminal(db), 90_000);
  return { gapMs, startsAfterLoss: await startsAfterTakeover(db, leader.workerId) };
}

/**
 * One round of a worker blocked past staleAfterMs where it makes no write, on fresh processes.
 * The blocked worker (A) is never the reaper leader, so the takeover does not wait for the
 * election: B leads and starts its worker only once A has claimed the task.
 */
async function blockRound(db: BenchDatabase, where: 'between-steps' | 'between-compensations'): Promise<number> {
  await db.client.query('TRUNCATE agent_tasks, step_runs, dead_letter_queue, chaos_effects, chaos_compensations');
  const key = `duraflow:bench:lease:${randomBytes(4).toString('hex')}`;
  const b = startWorker(db, 'B', key, { worker: false });
  const a = startWorker(db, 'A', key, { reaper: false });
  try {
    await Promise.all([a.ready, b.ready]);
    await until('B leads', () => leads(b), 15_000);
    await insertTasks(db, 'chaos-block', { where, blockMs: 3 * TIMINGS.staleAfterMs }, 1);
    await until('A ran s1', async () => (await db.client.query(`SELECT 1 FROM chaos_effects`)).rowCount! > 0, 15_000);
    await b.call('WorkerService', 'start');
    await until('the task finished', () => allTerminal(db), 60_000);
    // A answers only once its loop runs again; then it has let go of the task or finished what it started.
    await until(
      'A woke and let go of the task',
      async () =>
        (await a.request<{ running: number }>({ type: 'call', service: 'WorkerService', method: 'stats', args: [] }, 10_000)).running === 0,
      30_000,
    );
    await sleep(500); // every chance to start something more
    if (where === 'between-steps') {
      // The blocked worker recorded s1 first; an s2 by it is a step started after it lost the task.
      const { rows } = await db.client.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM chaos_effects
         WHERE step_key = 's2' AND worker_id = (SELECT worker_id FROM chaos_effects WHERE step_key = 's1' ORDER BY id LIMIT 1)`,
      );
      return rows[0].n;
    }
    // The blocked worker ran s2's compensation first; a compensation of s1 by it started after it lost the task.
    const { rows } = await db.client.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM chaos_compensations
       WHERE step_key = 's1' AND worker_id = (SELECT worker_id FROM chaos_compensations ORDER BY id LIMIT 1)`,
    );
    return rows[0].n;
  } finally {
    await stopAllWorkerProcesses();
  }
}

async function main(): Promise<void> {
  const { rounds, freezeMs } = parseArgs(process.argv.slice(2));
  const db = await createBenchDatabase();
  try {
    await db.client.query(CHAOS_TABLES_SQL);
    const key = `duraflow:bench:lease:${randomBytes(4).toString('hex')}`;
    const workers = [startWorker(db, 'A', key), startWorker(db, 'B', key)];
    await Promise.all(workers.map((worker) => worker.ready));
    const freezes: FreezeRound[] = [];
    const followerFreezes: FreezeRound[] = [];
    for (let i = 0; i < rounds; i++) {
      progress(`freeze round ${i + 1}/${rounds}: SIGSTOP of the leader for ${freezeMs} ms`);
      freezes.push(await freezeRound(db, workers, freezeMs, 'leader'));
      progress(
        `  longest time without a reaper leader ${freezes[i].gapMs.toFixed(0)} ms, ${freezes[i].startsAfterLoss} step(s) started after loss`,
      );
      progress(`freeze round ${i + 1}/${rounds}: SIGSTOP of the follower for ${freezeMs} ms`);
      followerFreezes.push(await freezeRound(db, workers, freezeMs, 'follower'));
      progress(`  ${followerFreezes[i].startsAfterLoss} step(s) started after loss`);
    }
    await stopAllWorkerProcesses();
    const between: number[] = [];
    const compensations: number[] = [];
    for (let i = 0; i < rounds; i++) {
      progress(
        `blocked round ${i + 1}/${rounds}: event loop blocked ${3 * TIMINGS.staleAfterMs} ms between steps, then between compensations`,
      );
      between.push(await blockRound(db, 'between-steps'));
      compensations.push(await blockRound(db, 'between-compensations'));
    }
    const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
    const lines = [
      `Leases that expire, ${new Date().toISOString()}: PostgreSQL election, heartbeat ${TIMINGS.heartbeatIntervalMs} ms, staleAfter ${TIMINGS.staleAfterMs} ms, reaper every ${TIMINGS.reaperIntervalMs} ms, leaderTtl ${TIMINGS.leaderTtlMs} ms`,
      '',
      '| fault | figure | value |',
      '|---|---|---|',
      `| leader SIGSTOP ${freezeMs} ms, ${rounds} times | longest time without a reaper leader | ${Math.max(...freezes.map((r) => r.gapMs)).toFixed(0)} ms (rounds: ${freezes.map((r) => r.gapMs.toFixed(0)).join(', ')}) |`,
      `| leader SIGSTOP ${freezeMs} ms, ${rounds} times | steps started by the woken leader for tasks taken over | ${sum(freezes.map((r) => r.startsAfterLoss))} (rounds: ${freezes.map((r) => r.startsAfterLoss).join(', ')}) |`,
      `| follower SIGSTOP ${freezeMs} ms, ${rounds} times | steps started by the woken follower for tasks taken over | ${sum(followerFreezes.map((r) => r.startsAfterLoss))} (rounds: ${followerFreezes.map((r) => r.startsAfterLoss).join(', ')}) |`,
      `| event loop blocked ${3 * TIMINGS.staleAfterMs} ms between steps, ${rounds} times | steps started after the lease was lost | ${sum(between)} of ${rounds} |`,
      `| event loop blocked ${3 * TIMINGS.staleAfterMs} ms between compensations, ${rounds} times | compensations started after the lease was lost | ${sum(compensations)} of ${rounds} |`,
    ];
    process.stdout.write(`\n${lines.join('\n')}\n`);
  } finally {
    await stopAllWorkerProcesses();
    await db.drop();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`[bench] failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    void stopAllWorkerProcesses().finally(() => process.exit(1));
  },
);
