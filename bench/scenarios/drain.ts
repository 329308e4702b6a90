import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { DRAIN_STEPS, DrainSteps } from '../config';
import { BenchContext, rawSection } from '../context';
import { drainRowId } from '../rows';
import { countDelta } from '../query-counter';
import { eventually } from '../../test/support/waiting';
import { busyPercent, cpuMs, machineCpu, processCpuMs, progress } from '../stats';
import { FlowBenchWorkflow } from '../protocol';
import { BenchWorkerProcess } from '../worker-process';
import { NOOP_WORKFLOW } from '../workflows';

export interface DrainResult {
  tasks: number;
  steps: DrainSteps;
  seconds: number;
  tasksPerSecond: number;
  stepsPerSecond: number;
  /** Statements the worker processes sent during the drain, by name (summed over the processes). */
  statements: Record<string, number>;
  /** CPU time of the worker processes (summed), per task. */
  workerCpuMsPerTask: number;
  /** CPU time of the PostgreSQL backends serving the bench database (Linux only), per task. */
  backendCpuMsPerTask: number | undefined;
  /** How busy the whole machine (PostgreSQL included) was during the drain. */
  machineBusyPercent: number;
  /** Rate over the first and the last tenth of the tasks: does the drain slow down as the table fills? */
  firstTenthPerSecond: number;
  lastTenthPerSecond: number;
}

/** CPU time so far of every backend connected to the bench database but the bench's own, by pid. */
async function backendCpu(ctx: BenchContext): Promise<Map<number, number> | undefined> {
  const { rows } = await ctx.db.client.query<{ pid: number }>(
    'SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
  );
  const cpu = new Map<number, number>();
  for (const { pid } of rows) {
    const ms = processCpuMs(pid);
    if (ms === undefined) return undefined;
    cpu.set(pid, ms);
  }
  return cpu;
}

/** Boots `count` worker processes with production intervals and their worker stopped. */
export async function bootWorkers(
  ctx: BenchContext,
  count: number,
  concurrency: number,
  exposeGc = false,
  flowWorkflow?: FlowBenchWorkflow,
): Promise<BenchWorkerProcess[]> {
  const workers = Array.from({ length: count }, (_, index) =>
    BenchWorkerProcess.start({
      databaseUrl: ctx.db.url,
      label: `w${index + 1}`,
      exposeGc,
      flowWorkflow,
      // Defaults everywhere (heartbeat 5 s, poll 500 ms, reaper every 10 s / stale after 30 s,
      // leader through a PostgreSQL advisory lock, pool of 10) but the concurrency; the worker
      // starts only when the tasks are in.
      duraflow: {
        workerId: `bench-w${index + 1}-${randomBytes(3).toString('hex')}`,
        worker: { enabled: false, concurrency, ...prefetchOption() },
      },
    }),
  );
  try {
    await Promise.all(workers.map((worker) => worker.ready));
  } catch (error) {
    await Promise.all(workers.map((worker) => worker.stop(2_000)));
    throw error;
  }
  return workers;
}

function prefetchOption(): { prefetch?: number | 'auto' } {
  const prefetch = benchPrefetch();
  return prefetch === undefined ? {} : { prefetch };
}

/** Sum of `completed` over the workers. */
async function completed(workers: BenchWorkerProcess[]): Promise<number> {
  const stats = await Promise.all(workers.map((worker) => worker.stats()));
  return stats.reduce((sum, s) => sum + s.completed, 0);
}

/**
 * Pre-submits `tasks` tasks (one INSERT … SELECT generate_series, then ANALYZE, not timed) with
 * every worker stopped, then times from the start of the workers to the last completion they report.
 */
export async function drainOnce(ctx: BenchContext, workers: BenchWorkerProcess[], steps: DrainSteps, tasks: number): Promise<DrainResult> {
  await ctx.db.truncate();
  await ctx.db.insertPending(NOOP_WORKFLOW, { steps }, tasks);
  await ctx.db.client.query('ANALYZE agent_tasks');
  return timeDrain(ctx, workers, steps, tasks);
}

/**
 * With `tasks` pending tasks of `steps` steps in ctx.db and every worker stopped: times from
 * the start of the workers to the last completion they report, and checks the table after.
 */
export async function timeDrain(ctx: BenchContext, workers: BenchWorkerProcess[], steps: DrainSteps, tasks: number): Promise<DrainResult> {
  const countsBefore = await Promise.all(workers.map((worker) => worker.queryCounts()));
  const cpuBefore = await Promise.all(workers.map((worker) => worker.cpuUsage()));
  const before = await completed(workers);
  const backendsBefore = await backendCpu(ctx);
  const machineBefore = machineCpu();
  const started = performance.now();
  await Promise.all(workers.map((worker) => worker.startWorker()));
  const progressAt: Array<[number, number]> = [[0, 0]];
  await eventually(
    `${tasks} ${steps}-step tasks have completed`,
    async () => {
      const done = (await completed(workers)) - before;
      progressAt.push([performance.now() - started, done]);
      return done >= tasks;
    },
    { timeoutMs: 900_000, everyMs: 20 },
  );
  const seconds = (performance.now() - started) / 1000;
  const machineBusyPercent = busyPercent(machineBefore, machineCpu());
  const backendsAfter = await backendCpu(ctx);
  // A backend that connected during the drain counts from zero.
  const backendCpuMs =
    backendsBefore && backendsAfter
      ? [...backendsAfter].reduce((sum, [pid, ms]) => sum + ms - (backendsBefore.get(pid) ?? 0), 0)
      : undefined;
  const cpuAfter = await Promise.all(workers.map((worker) => worker.cpuUsage()));
  const workerCpuMs = cpuAfter.reduce((sum, after, index) => sum + cpuMs(cpuBefore[index], after), 0);
  await Promise.all(workers.map((worker) => worker.stopWorker()));
  const countsAfter = await Promise.all(workers.map((worker) => worker.queryCounts()));
  const statements: Record<string, number> = {};
  countsAfter.forEach((after, index) => {
    for (const [key, n] of Object.entries(countDelta(countsBefore[index], after))) statements[key] = (statements[key] ?? 0) + n;
  });
  const { rows } = await ctx.db.client.query<{ status: string; n: string }>(
    'SELECT status, count(*) AS n FROM agent_tasks GROUP BY status',
  );
  const done = Number(rows.find((row) => row.status === 'completed')?.n ?? 0);
  if (done !== tasks) throw new Error(`drain of ${tasks} ${steps}-step tasks: the table says ${JSON.stringify(rows)}`);
  if (steps > 0) {
    const { rows: stepRows } = await ctx.db.client.query<{ n: string }>(`SELECT count(*) AS n FROM step_runs WHERE status = 'completed'`);
    if (Number(stepRows[0].n) !== tasks * steps) throw new Error(`drain: ${stepRows[0].n} completed steps, expected ${tasks * steps}`);
  }
  return {
    tasks,
    steps,
    seconds,
    tasksPerSecond: tasks / seconds,
    stepsPerSecond: (tasks * steps) / seconds,
    statements,
    workerCpuMsPerTask: workerCpuMs / tasks,
    backendCpuMsPerTask: backendCpuMs === undefined ? undefined : backendCpuMs / tasks,
    machineBusyPercent,
    ...tenthRates(progressAt, tasks),
  };
}

/** Tasks per second over the first and the last tenth of the tasks, from (ms since start, completed) samples. */
function tenthRates(samples: Array<[number, number]>, tasks: number): { firstTenthPerSecond: number; lastTenthPerSecond: number } {
  const reached = (count: number) => samples.find(([, done]) => done >= count)?.[0] ?? samples[samples.length - 1][0];
  const tenth = Math.max(1, Math.floor(tasks / 10));
  const rate = (from: number, to: number) => ((to - from) * 1000) / Math.max(1, reached(to) - reached(from));
  return { firstTenthPerSecond: rate(0, tenth), lastTenthPerSecond: rate(tasks - tenth, tasks) };
}

/** 0-, 1- and 10-step no-op workflows, at each concurrency, in one and in two worker processes. */
export async function drainScenario(ctx: BenchContext): Promise<void> {
  const raw = rawSection(ctx, 'drain');
  const profiled: DrainResult[] = [];
  for (const processes of ctx.sizes.drainProcesses) {
    for (const concurrency of ctx.sizes.drainConcurrency) {
      let workers: BenchWorkerProcess[] = [];
      try {
        workers = await bootWorkers(ctx, processes, concurrency);
        for (const steps of DRAIN_STEPS) {
          const tasks = ctx.sizes.drainTasks[steps];
          progress(`drain ${tasks} ${steps}-step tasks, concurrency ${concurrency}, ${processes} process(es)`);
          const result = await drainOnce(ctx, workers, steps, tasks);
          raw[`${steps}step_c${concurrency}_p${processes}`] = { ...result, concurrency, processes };
          if (processes === 1 && concurrency === ctx.sizes.drainConcurrency[0]) profiled.push(result);
          const note = `${tasks} tasks in ${result.seconds.toFixed(2)} s; ${describeCpu(result)}`;
          ctx.results.set(drainRowId(steps, concurrency, processes, 'tasks'), result.tasksPerSecond, note);
          if (steps > 0)
            ctx.results.set(drainRowId(steps, concurrency, processes, 'steps'), result.stepsPerSecond, `${tasks * steps} steps`);
        }
      } catch (error) {
        // The other configurations still run; the run exits non-zero.
        for (const worker of workers) process.stderr.write(`${worker.outputTail(40)}\n`);
        ctx.results.fail(`drain, concurrency ${concurrency}, ${processes} process(es)`, error);
      } finally {
        await Promise.all(workers.map((worker) => worker.stop()));
      }
    }
  }
  await ctx.db.truncate();
  if (profiled.length) ctx.appendix.push('', ...statementsPerTask(profiled, ctx.sizes.drainConcurrency[0]));
}

export function describeCpu(result: DrainResult): string {
  const backends =
    result.backendCpuMsPerTask === undefined ? '' : `, its PostgreSQL backends ${result.backendCpuMsPerTask.toFixed(2)} ms/task`;
  return `CPU: worker ${result.workerCpuMsPerTask.toFixed(2)} ms/task${backends}, machine ${Math.round(result.machineBusyPercent)}% busy`;
}

/** Statements per task of each drain, by statement: the round trips the database serves. */
function statementsPerTask(results: DrainResult[], concurrency: number): string[] {
  const lines = [
    `Statements per task sent by the worker process during the drains (concurrency ${concurrency}, 1 process), counted in node-postgres:`,
    '',
  ];
  for (const result of results) {
    const entries = Object.entries(result.statements).sort(([, a], [, b]) => b - a);
    const total = entries.reduce((sum, [, n]) => sum + n, 0) / result.tasks;
    const parts = entries.map(([key, n]) => `${key} ${(n / result.tasks).toFixed(2)}`);
    lines.push(`- ${result.steps}-step: ${total.toFixed(2)} per task = ${parts.join(', ')}`);
  }
  return lines;
}

/**
 * `BENCH_PREFETCH=n npm run bench` (or `=auto`) runs the drain workers with `worker.prefetch`
 * n; unset, they run with the module's default (`'auto'`).
 */
export function benchPrefetch(): number | 'auto' | undefined {
  const raw = process.env.BENCH_PREFETCH;
  if (raw === undefined || raw === '') return undefined;
  if (raw === 'auto') return 'auto';
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new Error(`BENCH_PREFETCH must be an integer >= 0 or 'auto', got ${raw}`);
  return value;
}
