/**
 * Duraflow beside its peers in the same run (issue 33, points 1 and 3): each peer in a fresh
 * process and a fresh database of the server the tests use, one after the other, the order
 * alternated from run to run, a pgbench one-row INSERT at 1 client before and after each run as
 * the reference of the machine's state.
 *
 * - **burst**: 1,000 workflows of 10 no-op steps started at once (after a warm-up of 100), timed
 *   from the first start to the last completion. Duraflow: one worker process at the library's
 *   defaults (bench/worker-main.ts), the 1,000 `submit()` calls sent to it at once over IPC, its
 *   completions polled every 20 ms. DBOS (`@dbos-inc/dbos-sdk`): `DBOS.startWorkflow` 1,000
 *   times at once in its process (bench/peers/dbos-steps.mjs).
 * - **drain**: 20,000 0-step tasks submitted through the API with no worker running (Duraflow
 *   `submitMany()` in batches of 100, graphile-worker `addJobs()` in batches of 100; not timed),
 *   then drained by one worker process, timed from its start to the last completion. Duraflow at
 *   concurrency 10 and at its default; graphile-worker at concurrency 10 unbatched (its
 *   defaults) and batched as its performance guide sets it (`localQueue.size`, completions
 *   written together), with a local queue of 20 (what Duraflow's prefetch holds at 10) and 500.
 *
 * The peers are installed on demand into bench/peers/node_modules (`npm ci --prefix bench/peers`,
 * from its own lockfile; never by the project's `npm ci`). Not part of `npm run bench`:
 *
 *   node -r ./test/support/swc-register.js bench/peers-compare.ts [--runs 3] [--quick]
 *
 * Prints one Markdown table (median and min–max over the runs, and the ratios of the issue).
 * Figures in bench/README.md ("Beside the peers, same run").
 */
import 'reflect-metadata';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { promisify } from 'node:util';
import { DURAFLOW_DEFAULTS } from '@duraflow/nestjs';
import { createTestDatabase } from '../test/support/database';
import { eventually } from '../test/support/waiting';
import { createBenchDatabase } from './database';
import { pgbench } from './pgbench';
import { cpuMs, median, progress } from './stats';
import { BenchWorkerProcess } from './worker-process';
import { NOOP_WORKFLOW } from './workflows';

const exec = promisify(execFile);
const PEERS_DIR = path.join(__dirname, 'peers');
const quick = process.argv.includes('--quick');
const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg > 0 ? Number(process.argv[runsArg + 1]) : 1;
const BURST = quick ? 100 : 1_000;
const BURST_STEPS = 10;
const DRAIN = quick ? 2_000 : 20_000;

/** One figure of one run: throughput (steps/s for the burst, tasks/s for the drain) and the process's CPU. */
interface Sample {
  row: string;
  value: number;
  cpuPercent: number;
}

async function ensurePeersInstalled(): Promise<void> {
  if (
    existsSync(path.join(PEERS_DIR, 'node_modules', '@dbos-inc', 'dbos-sdk')) &&
    existsSync(path.join(PEERS_DIR, 'node_modules', 'graphile-worker'))
  )
    return;
  progress('installing the peers into bench/peers/node_modules (npm ci)');
  await exec('npm', ['ci', '--prefix', PEERS_DIR, '--no-audit', '--no-fund'], { maxBuffer: 16 * 1024 * 1024 });
}

/** An empty database of its own for a peer (the peer creates its schema), dropped after. */
async function withEmptyDatabase<T>(fn: (url: string) => Promise<T>): Promise<T> {
  const db = await createTestDatabase({ migrate: false, prefix: 'duraflow_peer' });
  try {
    return await fn(db.url);
  } finally {
    await db.drop();
  }
}

/** Runs a peer's script in a fresh node process and reads the JSON line it prints. */
async function runPeer(script: string, args: string[]): Promise<Record<string, number | string>> {
  const { stdout } = await exec(process.execPath, [path.join(PEERS_DIR, script), ...args], {
    cwd: PEERS_DIR,
    maxBuffer: 16 * 1024 * 1024,
    timeout: 600_000,
  });
  const line = stdout.trim().split('\n').pop() ?? '';
  return JSON.parse(line) as Record<string, number | string>;
}

async function bootDuraflow(url: string, label: string, concurrency?: number): Promise<BenchWorkerProcess> {
  const worker = BenchWorkerProcess.start({
    databaseUrl: url,
    label,
    duraflow: {
      workerId: `peers-${label}-${randomBytes(3).toString('hex')}`,
      worker: { enabled: false, ...(concurrency === undefined ? {} : { concurrency }) },
    },
  });
  await worker.ready;
  return worker;
}

async function completedCount(worker: BenchWorkerProcess): Promise<number> {
  return (await worker.stats()).completed;
}

/** `count` submits at once to a started worker's process; seconds from the first to the last completion. */
async function duraflowBurstOnce(worker: BenchWorkerProcess, count: number): Promise<number> {
  const before = await completedCount(worker);
  const started = performance.now();
  await Promise.all(Array.from({ length: count }, () => worker.call('WorkflowService', 'submit', NOOP_WORKFLOW, { steps: BURST_STEPS })));
  await eventually(`${count} burst workflows completed`, async () => (await completedCount(worker)) - before >= count, {
    timeoutMs: 600_000,
    everyMs: 20,
  });
  return (performance.now() - started) / 1000;
}

async function duraflowBurst(): Promise<Sample> {
  const db = await createBenchDatabase();
  const worker = await bootDuraflow(db.url, 'burst');
  try {
    await worker.startWorker();
    await duraflowBurstOnce(worker, Math.min(100, BURST));
    const cpu = await worker.cpuUsage();
    const seconds = await duraflowBurstOnce(worker, BURST);
    const used = cpuMs(cpu, await worker.cpuUsage());
    return { row: 'burst.duraflow', value: (BURST * BURST_STEPS) / seconds, cpuPercent: (used / (seconds * 1000)) * 100 };
  } finally {
    await worker.stop();
    await db.drop();
  }
}

async function dbosBurst(): Promise<Sample> {
  const result = await withEmptyDatabase((url) => runPeer('dbos-steps.mjs', [url, String(BURST), String(BURST_STEPS)]));
  return { row: 'burst.dbos', value: Number(result.stepsPerSecond), cpuPercent: Number(result.cpuPercent) };
}

async function duraflowDrain(concurrency?: number): Promise<Sample> {
  const db = await createBenchDatabase();
  const worker = await bootDuraflow(db.url, `drain-c${concurrency ?? 'default'}`, concurrency);
  try {
    for (let submitted = 0; submitted < DRAIN; submitted += 100) {
      const inputs = Array.from({ length: Math.min(100, DRAIN - submitted) }, () => ({ steps: 0 }));
      await worker.call('WorkflowService', 'submitMany', NOOP_WORKFLOW, inputs);
    }
    await db.client.query('CHECKPOINT');
    const before = await completedCount(worker);
    const cpu = await worker.cpuUsage();
    const started = performance.now();
    await worker.startWorker();
    await eventually(`${DRAIN} tasks drained`, async () => (await completedCount(worker)) - before >= DRAIN, {
      timeoutMs: 600_000,
      everyMs: 20,
    });
    const seconds = (performance.now() - started) / 1000;
    const used = cpuMs(cpu, await worker.cpuUsage());
    const { rows } = await db.client.query<{ n: number }>(`SELECT count(*)::int AS n FROM agent_tasks WHERE status = 'completed'`);
    if (rows[0].n !== DRAIN) throw new Error(`drain: ${rows[0].n} of ${DRAIN} completed`);
    return { row: `drain.duraflow.${concurrency ?? 'default'}`, value: DRAIN / seconds, cpuPercent: (used / (seconds * 1000)) * 100 };
  } finally {
    await worker.stop();
    await db.drop();
  }
}

async function graphileDrain(localQueue: number): Promise<Sample> {
  const result = await withEmptyDatabase((url) => runPeer('graphile-drain.mjs', [url, String(DRAIN), '10', String(localQueue)]));
  return { row: `drain.graphile.${localQueue}`, value: Number(result.tasksPerSecond), cpuPercent: Number(result.cpuPercent) };
}

async function reference(): Promise<Sample> {
  const db = await createBenchDatabase();
  try {
    await db.client.query('CREATE TABLE bench_ref (id bigserial PRIMARY KEY, v int)');
    const result = await pgbench(db.url, 'INSERT INTO bench_ref(v) VALUES (1);', 1, quick ? 2 : 5);
    return { row: 'reference', value: result.tps, cpuPercent: 0 };
  } finally {
    await db.drop();
  }
}

const ROWS: Array<{ id: string; label: string; unit: string }> = [
  { id: 'reference', label: 'pgbench one-row INSERT, 1 client (before and after each run)', unit: 'tx/s' },
  {
    id: 'burst.duraflow',
    label: `Duraflow, defaults (concurrency ${DURAFLOW_DEFAULTS.worker.concurrency}): ${BURST} × ${BURST_STEPS}-step workflows at once`,
    unit: 'steps/s',
  },
  { id: 'burst.dbos', label: `DBOS, defaults: the same workflows started at once`, unit: 'steps/s' },
  { id: 'drain.duraflow.10', label: `Duraflow, concurrency 10: drain of ${DRAIN} submitted 0-step tasks`, unit: 'tasks/s' },
  {
    id: 'drain.duraflow.default',
    label: `Duraflow, defaults (concurrency ${DURAFLOW_DEFAULTS.worker.concurrency}): the same drain`,
    unit: 'tasks/s',
  },
  { id: 'drain.graphile.-1', label: 'graphile-worker, concurrency 10, unbatched (its defaults)', unit: 'tasks/s' },
  { id: 'drain.graphile.20', label: 'graphile-worker, concurrency 10, batched: local queue 20', unit: 'tasks/s' },
  { id: 'drain.graphile.500', label: 'graphile-worker, concurrency 10, batched: local queue 500', unit: 'tasks/s' },
];

async function oneRun(run: number): Promise<Sample[]> {
  const samples: Sample[] = [await reference()];
  // Alternate who goes first, so a drift of the machine within a run favours nobody.
  const burst = run % 2 === 0 ? [duraflowBurst, dbosBurst] : [dbosBurst, duraflowBurst];
  for (const measure of burst) {
    progress(`run ${run + 1}: ${measure.name}`);
    samples.push(await measure());
  }
  const drains: Array<[string, () => Promise<Sample>]> = [
    ['Duraflow c10', () => duraflowDrain(10)],
    ['Duraflow defaults', () => duraflowDrain()],
    ['graphile-worker unbatched', () => graphileDrain(-1)],
    ['graphile-worker local queue 20', () => graphileDrain(20)],
    ['graphile-worker local queue 500', () => graphileDrain(500)],
  ];
  for (const [label, measure] of run % 2 === 0 ? drains : [...drains].reverse()) {
    progress(`run ${run + 1}: drain, ${label}`);
    samples.push(await measure());
  }
  samples.push(await reference());
  return samples;
}

function summary(samples: Sample[], id: string): { median: number; min: number; max: number; cpu: number } {
  const values = samples.filter((sample) => sample.row === id);
  return {
    median: median(values.map((sample) => sample.value)),
    min: Math.min(...values.map((sample) => sample.value)),
    max: Math.max(...values.map((sample) => sample.value)),
    cpu: median(values.map((sample) => sample.cpuPercent)),
  };
}

/** Each run's own ratio `a ÷ b`, then their median and min–max: a ratio is read within one run. */
function ratio(runs: Sample[][], a: string, b: string): string {
  const ratios = runs.map((samples) => summary(samples, a).median / summary(samples, b).median);
  const spread = ratios.length > 1 ? ` (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})` : '';
  return `${median(ratios).toFixed(2)}×${spread}`;
}

async function main(): Promise<void> {
  await ensurePeersInstalled();
  const runs: Sample[][] = [];
  for (let run = 0; run < RUNS; run++) runs.push(await oneRun(run));
  const all = runs.flat();
  const lines = [
    `Load average at the end: ${loadavg()
      .map((v) => v.toFixed(1))
      .join(' / ')}; ${RUNS} run(s).`,
    '',
    '| figure | median (min–max) | process CPU (median, % of one core) |',
    '|---|---|---|',
  ];
  for (const row of ROWS) {
    const s = summary(all, row.id);
    const spread = RUNS > 1 || row.id === 'reference' ? ` (${Math.round(s.min)}–${Math.round(s.max)})` : '';
    lines.push(
      `| ${row.label} | ${Math.round(s.median)} ${row.unit}${spread} | ${row.id === 'reference' ? '–' : `${Math.round(s.cpu)} %`} |`,
    );
  }
  lines.push(
    '',
    '| ratio, within each run | median (min–max) | target |',
    '|---|---|---|',
    `| burst: Duraflow defaults ÷ DBOS | ${ratio(runs, 'burst.duraflow', 'burst.dbos')} | ≥ 3× |`,
    `| drain: Duraflow c10 ÷ graphile-worker batched, local queue 20 | ${ratio(runs, 'drain.duraflow.10', 'drain.graphile.20')} | ≥ 2× |`,
    `| drain: Duraflow defaults ÷ graphile-worker batched, local queue 20 | ${ratio(runs, 'drain.duraflow.default', 'drain.graphile.20')} | ≥ 2× |`,
    `| drain: Duraflow defaults ÷ graphile-worker batched, local queue 500 | ${ratio(runs, 'drain.duraflow.default', 'drain.graphile.500')} | – |`,
    `| drain: Duraflow c10 ÷ graphile-worker unbatched | ${ratio(runs, 'drain.duraflow.10', 'drain.graphile.-1')} | – |`,
  );
  console.log(lines.join('\n'));
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
