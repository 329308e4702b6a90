/**
 * Duraflow's benchmark suite: `npm run bench` (about 10 minutes on 2 cores) or
 * `npm run bench:quick` (`npm run bench -- --quick`, under a minute, a smoke that asserts
 * nothing about speed). Creates its own database, prints one Markdown table (stdout; progress
 * goes to stderr), writes the raw results as JSON, drops the database. Exits non-zero when any
 * scenario threw. Options: --quick, --out <file.json>, --only <scenario,...> (just those scenarios,
 * e.g. `--only idle-worker,determinism-guard`; the rows of the others stay empty).
 */
import 'reflect-metadata';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { WorkerService, WorkflowService } from '@duraflow/nestjs';
import { startBenchApp } from './app';
import { FULL_SIZES, QUICK_SIZES } from './config';
import { BenchContext } from './context';
import { createBenchDatabase } from './database';
import { BenchResults, renderTable } from './report';
import { claimScenario } from './scenarios/claim';
import { determinismGuardScenario } from './scenarios/determinism-guard';
import { drainScenario } from './scenarios/drain';
import { flowControlScenario } from './scenarios/flow-control';
import { idleWorkerScenario } from './scenarios/idle-worker';
import { memoryScenario } from './scenarios/memory';
import { primitivesScenario } from './scenarios/primitives';
import { recoveryScenario } from './scenarios/recovery';
import { referenceAgainScenario, referenceScenario } from './scenarios/reference';
import { submittedDrainScenario } from './scenarios/submitted-drain';
import { submitScenario } from './scenarios/submit';
import { progress } from './stats';
import { stopAllWorkerProcesses } from '../test/support/worker-process';
import { RunProbe } from './workflows';

interface Args {
  quick: boolean;
  out: string;
  /** Run only these scenarios (by name); undefined: all. */
  only?: Set<string>;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { quick: false, out: path.join(os.tmpdir(), 'duraflow-bench', 'latest.json') };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--quick') args.quick = true;
    else if (argv[i] === '--out' && argv[i + 1]) args.out = path.resolve(argv[++i]);
    else if (argv[i] === '--only' && argv[i + 1]) args.only = new Set(argv[++i].split(','));
    else throw new Error(`Unknown argument "${argv[i]}" (use --quick, --out <file.json>, --only <scenario,...>)`);
  }
  return args;
}

let onlyScenarios: Set<string> | undefined;

async function scenario(ctx: BenchContext, name: string, body: () => Promise<void>): Promise<void> {
  if (onlyScenarios && !onlyScenarios.has(name)) return;
  // What the previous scenario wrote (the SKIP LOCKED reference alone queues 300k rows) is
  // flushed now, not by the background writer while this one is measured.
  await settleDisk(ctx);
  const started = performance.now();
  try {
    await body();
  } catch (error) {
    ctx.results.fail(name, error);
    await stopAllWorkerProcesses();
  } finally {
    ctx.raw.durations ??= {};
    ctx.raw.durations[name] = Math.round(performance.now() - started) / 1000;
  }
}

async function serverInfo(ctx: BenchContext): Promise<Record<string, string>> {
  const { rows } = await ctx.db.client.query<{
    version: string;
    synchronous_commit: string;
    fsync: string;
    shared_buffers: string;
    max_connections: string;
  }>(
    `SELECT version(), current_setting('synchronous_commit') AS synchronous_commit, current_setting('fsync') AS fsync,
            current_setting('shared_buffers') AS shared_buffers, current_setting('max_connections') AS max_connections`,
  );
  return rows[0];
}

function machineLine(server: Record<string, string>): string {
  const pg = /PostgreSQL [\d.]+/.exec(server.version)?.[0] ?? server.version;
  return (
    `${os.cpus().length} cores (${os.cpus()[0]?.model.trim()}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, ` +
    `${pg} on loopback (synchronous_commit ${server.synchronous_commit}, fsync ${server.fsync}, shared_buffers ${server.shared_buffers})`
  );
}

/** CHECKPOINT (the bench runs as a superuser or with pg_checkpoint); skipped, with a note, when not allowed. */
async function settleDisk(ctx: BenchContext): Promise<void> {
  try {
    await ctx.db.client.query('CHECKPOINT');
  } catch (error) {
    progress(`CHECKPOINT not allowed (${(error as Error).message}): the next figures may pay for the earlier writes`);
  }
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  onlyScenarios = args.only;
  const startedAt = new Date();
  const started = performance.now();
  const loadBefore = os.loadavg();
  const db = await createBenchDatabase();
  progress(`${args.quick ? 'quick' : 'full'} run on database ${db.name}`);
  const ctx: BenchContext = {
    db,
    sizes: args.quick ? QUICK_SIZES : FULL_SIZES,
    quick: args.quick,
    results: new BenchResults(),
    raw: {},
    appendix: [],
  };
  const onSignal = () => {
    void stopAllWorkerProcesses()
      .then(() => db.drop())
      .finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  let server: Record<string, string>;
  try {
    server = await serverInfo(ctx);
    await scenario(ctx, 'reference', () => referenceScenario(ctx));

    const probe = new RunProbe();
    const app = await startBenchApp(db.url, probe);
    try {
      const workflows = app.get(WorkflowService);
      await scenario(ctx, 'submit', () => submitScenario(ctx, workflows));
      await db.truncate();
      await scenario(ctx, 'idle-worker', async () => {
        const worker = app.get(WorkerService);
        await worker.start();
        try {
          await idleWorkerScenario(ctx, workflows, probe);
        } finally {
          await worker.stop();
        }
      });
      await db.truncate();
      await scenario(ctx, 'primitives', async () => {
        const worker = app.get(WorkerService);
        await worker.start();
        try {
          await primitivesScenario(ctx, workflows);
        } finally {
          await worker.stop();
        }
      });
    } finally {
      await app.close();
    }
    await db.truncate();

    await scenario(ctx, 'claim', () => claimScenario(ctx));
    await scenario(ctx, 'drain', () => drainScenario(ctx));
    await scenario(ctx, 'submitted-drain', () => submittedDrainScenario(ctx));
    await scenario(ctx, 'flow-control', () => flowControlScenario(ctx));
    await scenario(ctx, 'recovery', () => recoveryScenario(ctx));
    await scenario(ctx, 'determinism-guard', () => determinismGuardScenario(ctx));
    await scenario(ctx, 'memory', () => memoryScenario(ctx));
    await scenario(ctx, 'reference-again', () => referenceAgainScenario(ctx));
  } finally {
    await stopAllWorkerProcesses();
    await db.drop();
  }

  const seconds = (performance.now() - started) / 1000;
  const loadAfter = os.loadavg();
  const table = renderTable(ctx.results);
  const header = [
    `Duraflow bench, ${args.quick ? 'QUICK (smoke sizes, figures not meaningful)' : 'full'} run of ${startedAt.toISOString()}, ${seconds.toFixed(0)} s`,
    `Machine: ${machineLine(server)}; load average ${loadBefore[0].toFixed(2)} before, ${loadAfter[0].toFixed(2)} after`,
    'Ratios: throughputs ÷ pgbench one-row INSERT tx/s at 1 client (1c) or 4 clients (4c); durations ÷ one such commit at 1 client (1c commit = 1000 / tx/s ms).',
  ];
  process.stdout.write(`\n${header.join('\n')}\n\n${table}\n\n${ctx.appendix.join('\n')}\n`);

  const json = {
    mode: args.quick ? 'quick' : 'full',
    startedAt: startedAt.toISOString(),
    seconds,
    machine: {
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model,
      totalMemBytes: os.totalmem(),
      node: process.version,
      server,
      loadBefore,
      loadAfter,
    },
    sizes: ctx.sizes,
    figures: Object.fromEntries(ctx.results.figures),
    errors: ctx.results.errors,
    raw: ctx.raw,
    table,
  };
  mkdirSync(path.dirname(args.out), { recursive: true });
  writeFileSync(args.out, `${JSON.stringify(json, null, 2)}\n`);
  process.stdout.write(`\nRaw results: ${args.out}\n`);
  if (ctx.results.errors.length) {
    process.stdout.write(
      `\n${ctx.results.errors.length} scenario(s) failed: ${ctx.results.errors.map((error) => error.scenario).join(', ')}\n`,
    );
    return 1;
  }
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`[bench] failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    void stopAllWorkerProcesses().finally(() => process.exit(1));
  },
);
