/**
 * Failovers under load (issue 32), not part of `npm run bench`, nothing asserted:
 *
 *   node -r ./test/support/swc-register.js bench/failover.ts [--rounds 5] [--async-rounds 3] [--tasks 200]
 *
 * A primary and a streaming hot standby of Debian's PostgreSQL behind an address the failover
 * moves (test/support/failover-pair.ts), two worker processes (bench/failover-worker.ts) on that
 * address. Phase 1, standby synchronous: the statements each kind of task sends, the time a step
 * takes with and without a synchronous standby (and with each `synchronous_commit`), then
 * `--rounds` failovers in a row under load (bench/failover-round.ts). Phase 2: a new pair whose
 * standby is asynchronous, `--async-rounds` failovers: what was lost. Prints Markdown tables;
 * the raw results go to <tmpdir>/duraflow-bench/failover.json.
 */
import 'reflect-metadata';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runDuraflowMigrations } from '@duraflow/nestjs';
import { createTestDatabase, TestDatabase } from '../test/support/database';
import { FailoverPair } from '../test/support/failover-pair';
import { eventually, sleep } from '../test/support/waiting';
import { stopAllWorkerProcesses, WorkerProcess } from '../test/support/worker-process';
import { failoverRound, FailoverWorker, RoundResult } from './failover-round';
import type { FailoverWorkerConfig } from './failover-worker';
import { FAILOVER_BENCH_WORKFLOW, FAILOVER_EFFECTS_SQL, FailoverBenchKind } from './failover-workflows';
import { countDelta } from './query-counter';
import { progress, quantile } from './stats';

const DATABASE = 'bench';
const ENTRY = path.join(__dirname, 'failover-worker.ts');

function args(): { rounds: number; asyncRounds: number; tasks: number } {
  const argv = process.argv.slice(2);
  const value = (name: string, fallback: number) => {
    const at = argv.indexOf(`--${name}`);
    return at >= 0 ? Number(argv[at + 1]) : fallback;
  };
  return { rounds: value('rounds', 5), asyncRounds: value('async-rounds', 3), tasks: value('tasks', 200) };
}

function startWorker(pair: FailoverPair, effects: TestDatabase, label: string): FailoverWorker {
  const config: FailoverWorkerConfig = {
    databaseUrl: pair.urlOf(DATABASE),
    effectsUrl: effects.url,
    duraflow: {
      workerId: `failover-bench-${label}`,
      heartbeatIntervalMs: 200,
      worker: { concurrency: 10, pollIntervalMs: 100, maxIdlePollIntervalMs: 1_000, shutdownTimeoutMs: 1_000 },
      // Stale only well past a failover: the workers live on, so nothing is reaped for real.
      reaper: { enabled: true, intervalMs: 500, staleAfterMs: 15_000, leaderTtlMs: 1_500 },
      maxRetries: 10,
    },
  };
  return new WorkerProcess({ entry: ENTRY, config, label, readyTimeoutMs: 120_000, requestTimeoutMs: 60_000 });
}

async function startPair(synchronous: boolean, effects: TestDatabase): Promise<{ pair: FailoverPair; workers: FailoverWorker[] }> {
  const pair = await FailoverPair.start({ synchronous });
  await pair.query('postgres', `CREATE DATABASE ${DATABASE}`);
  await runDuraflowMigrations(pair.primaryUrl(DATABASE));
  const workers = [startWorker(pair, effects, 'a'), startWorker(pair, effects, 'b')];
  await Promise.all(workers.map((worker) => worker.ready));
  return { pair, workers };
}

/** Submits `count` tasks of `kind` (sequentially when `sequential`) and waits for them; their outputs. */
async function runTasks(pair: FailoverPair, worker: FailoverWorker, kind: FailoverBenchKind, count: number, sequential: boolean) {
  const ids: string[] = [];
  const outputs: unknown[] = [];
  const wait = async (batch: string[]) => {
    const rows = await eventually(
      `${batch.length} ${kind} tasks finished`,
      async () => {
        const found = await pair.query<{ output: unknown }>(
          DATABASE,
          `SELECT output FROM agent_tasks WHERE id = ANY($1::uuid[]) AND status NOT IN ('pending', 'running')`,
          [batch],
        );
        return found.length === batch.length ? found : null;
      },
      { timeoutMs: 120_000, everyMs: 20 },
    );
    outputs.push(...rows!.map((row) => row.output));
  };
  for (let n = 0; n < count; n++) {
    const task = await worker.call<{ id: string }>('WorkflowService', 'submit', FAILOVER_BENCH_WORKFLOW, { kind, n });
    if (sequential) await wait([task.id]);
    else ids.push(task.id);
    if (kind === 'signal') await worker.call('WorkflowService', 'signal', task.id, 'go', null);
  }
  if (!sequential) await wait(ids);
  return outputs;
}

/** Statements per task of each kind, over both workers (counted in node-postgres). */
async function statementsPerTask(pair: FailoverPair, workers: FailoverWorker[]): Promise<Record<string, Record<string, number>>> {
  const result: Record<string, Record<string, number>> = {};
  const total = async () => {
    const counts = await Promise.all(workers.map((worker) => worker.request<Record<string, number>>({ type: 'query-counts' })));
    const sum: Record<string, number> = {};
    for (const one of counts) for (const [key, n] of Object.entries(one)) sum[key] = (sum[key] ?? 0) + n;
    return sum;
  };
  for (const kind of ['steps', 'saga', 'sleep', 'signal'] as const) {
    const tasks = 100;
    const before = await total();
    await runTasks(pair, workers[0], kind, tasks, false);
    await sleep(300);
    const delta = countDelta(before, await total());
    result[kind] = Object.fromEntries(
      Object.entries(delta)
        .map(([key, n]) => [key, Math.round((n / tasks) * 100) / 100] as const)
        // The bench's own effect rows are not the library's.
        .filter(([key, n]) => n >= 0.01 && !key.startsWith('INSERT INTO failover_effects')),
    );
  }
  return result;
}

/** The settings a latency row runs under, set on the primary with ALTER SYSTEM and a reload. */
const LATENCY_MODES: Array<{ name: string; standbyNames: string; commit: string }> = [
  { name: 'asynchronous standby (synchronous_standby_names empty), synchronous_commit on', standbyNames: '', commit: 'on' },
  { name: 'synchronous standby, synchronous_commit remote_write', standbyNames: 'failover_standby', commit: 'remote_write' },
  { name: 'synchronous standby, synchronous_commit on (flushed on the standby)', standbyNames: 'failover_standby', commit: 'on' },
  { name: 'synchronous standby, synchronous_commit remote_apply', standbyNames: 'failover_standby', commit: 'remote_apply' },
];

/** Per-step time (a no-op step, from its call to its return) under each mode, alternated over `rounds`. */
async function stepLatency(pair: FailoverPair, workers: FailoverWorker[], rounds = 4) {
  const samples = new Map<string, number[]>(LATENCY_MODES.map((mode) => [mode.name, []]));
  await workers[1].call('WorkerService', 'stop');
  await runTasks(pair, workers[0], 'timed', 3, true);
  for (let round = 0; round < rounds; round++) {
    // Each round starts at another mode, so no mode always follows the same one.
    for (const mode of LATENCY_MODES.map((_, i) => LATENCY_MODES[(i + round) % LATENCY_MODES.length])) {
      await pair.query('postgres', `ALTER SYSTEM SET synchronous_standby_names = '${mode.standbyNames}'`);
      await pair.query('postgres', `ALTER SYSTEM SET synchronous_commit = '${mode.commit}'`);
      await pair.query('postgres', `SELECT pg_reload_conf()`);
      await sleep(300);
      const outputs = (await runTasks(pair, workers[0], 'timed', 5, true)) as Array<{ ms: number[] }>;
      samples.get(mode.name)!.push(...outputs.flatMap((output) => output.ms.slice(1)));
    }
  }
  await pair.query('postgres', `ALTER SYSTEM SET synchronous_standby_names = 'failover_standby'`);
  await pair.query('postgres', `ALTER SYSTEM RESET synchronous_commit`);
  await pair.query('postgres', `SELECT pg_reload_conf()`);
  await workers[1].call('WorkerService', 'start');
  return LATENCY_MODES.map((mode) => {
    const ms = samples.get(mode.name)!;
    return { mode: mode.name, steps: ms.length, p50: quantile(ms, 0.5), p95: quantile(ms, 0.95) };
  });
}

async function phase(synchronous: boolean, rounds: number, tasks: number, effects: TestDatabase, raw: Record<string, unknown>) {
  const { pair, workers } = await startPair(synchronous, effects);
  try {
    if (synchronous) {
      progress('statements per task, by kind');
      raw.statements = await statementsPerTask(pair, workers);
      progress('per-step latency with and without a synchronous standby');
      raw.latency = await stepLatency(pair, workers);
    }
    const results: RoundResult[] = [];
    for (let round = 1; round <= rounds; round++) {
      progress(`${synchronous ? 'synchronous' : 'asynchronous'} standby: failover ${round} of ${rounds}, ${tasks} tasks`);
      results.push(await failoverRound({ round, pair, database: DATABASE, workers, effects: effects.client, tasks, synchronous }));
      progress(JSON.stringify(results[results.length - 1]));
    }
    const exits = workers.filter((worker) => !worker.alive).length;
    raw[synchronous ? 'synchronous' : 'asynchronous'] = { results, workerExits: exits };
    return results;
  } finally {
    await stopAllWorkerProcesses();
    await pair.close();
  }
}

function roundsTable(results: RoundResult[]): string {
  const head =
    '| standby | failover | WAL not replayed at kill | kill → address moved | unavailable: first failed statement → first claim (→ first task claimed) | tasks submitted / finished | submits lost | wrong status | steps checkpointed | checkpoints acknowledged / lost | completions lost | signals lost | step bodies run twice | dead letters | stuck |';
  const rows = results.map(
    (r) =>
      `| ${r.synchronous ? 'sync' : 'async'} | ${r.round} | ${r.lagBytes ?? '—'} B | ${r.times.movedAt - r.times.killedAt} ms | ${r.windowMs ?? '—'} ms (${r.windowToTaskMs ?? '—'} ms) | ${r.submitted} / ${r.finished} | ${r.submitsLost} | ${r.wrongStatus} | ${r.stepsCompleted} | ${r.checkpointsAcked} / ${r.checkpointsLost} | ${r.completionsLost} | ${r.signalsLost} | ${r.stepsRunTwice} | ${r.deadLetters} | ${r.stuck} |`,
  );
  return [head, `|${'---|'.repeat(16)}`, ...rows].join('\n');
}

async function main(): Promise<void> {
  const { rounds, asyncRounds, tasks } = args();
  const started = new Date();
  const effects = await createTestDatabase({ prefix: 'duraflow_failover_fx' });
  await effects.client.query(FAILOVER_EFFECTS_SQL);
  const raw: Record<string, unknown> = { startedAt: started.toISOString(), rounds, asyncRounds, tasks, loadBefore: os.loadavg() };
  try {
    const sync = rounds > 0 ? await phase(true, rounds, tasks, effects, raw) : [];
    const async = asyncRounds > 0 ? await phase(false, asyncRounds, tasks, effects, raw) : [];
    raw.loadAfter = os.loadavg();
    const latency = (raw.latency ?? []) as Array<{ mode: string; steps: number; p50: number; p95: number }>;
    const out = [
      `Failover bench, ${started.toISOString()}, ${tasks} tasks a failover, load average ${os.loadavg()[0].toFixed(2)}`,
      '',
      roundsTable([...sync, ...async]),
      '',
      '| per-step time (no-op step, call → return, p50 / p95) | steps | p50 | p95 |',
      '|---|---|---|---|',
      ...latency.map((row) => `| ${row.mode} | ${row.steps} | ${row.p50.toFixed(3)} ms | ${row.p95.toFixed(3)} ms |`),
      '',
      'Statements per task, by kind (both workers, node-postgres):',
      ...Object.entries((raw.statements ?? {}) as Record<string, Record<string, number>>).map(
        ([kind, counts]) =>
          `- ${kind}: ${Object.values(counts)
            .reduce((a, b) => a + b, 0)
            .toFixed(2)} = ${Object.entries(counts)
            .sort(([, a], [, b]) => b - a)
            .map(([key, n]) => `${key} ${n}`)
            .join(', ')}`,
      ),
    ];
    process.stdout.write(`${out.join('\n')}\n`);
  } finally {
    const file = path.join(os.tmpdir(), 'duraflow-bench', 'failover.json');
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, `${JSON.stringify(raw, null, 2)}\n`);
    progress(`raw results: ${file}`);
    await stopAllWorkerProcesses();
    await effects.drop();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`[failover bench] failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    void stopAllWorkerProcesses().finally(() => process.exit(1));
  },
);
