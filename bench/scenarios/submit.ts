import { performance } from 'node:perf_hooks';
import { WorkflowService } from '@duraflow/nestjs';
import { BenchContext, rawSection } from '../context';
import { cpuMs, progress } from '../stats';
import { NOOP_WORKFLOW } from '../workflows';

/** `count` tasks through submit(), one at a time from each of `callers` concurrent callers. */
export async function submitConcurrently(workflows: WorkflowService, count: number, callers: number, input: object): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (next++ < count) await workflows.submit(NOOP_WORKFLOW, input);
    }),
  );
}

/** At least `count` tasks through submitMany(), `batchSize` per call; returns how many. */
export async function submitInBatches(workflows: WorkflowService, count: number, batchSize: number, input: object): Promise<number> {
  const batch = Array.from({ length: batchSize }, () => input);
  const batches = Math.ceil(count / batchSize);
  for (let i = 0; i < batches; i++) await workflows.submitMany(NOOP_WORKFLOW, batch);
  return batches * batchSize;
}

/** submit() one at a time, from concurrent callers, and submitMany() in batches. */
export async function submitScenario(ctx: BenchContext, workflows: WorkflowService): Promise<void> {
  const { sizes, db } = ctx;
  const raw = rawSection(ctx, 'submit');
  const input = { steps: 0 };

  for (let i = 0; i < sizes.submitWarmup; i++) await workflows.submit(NOOP_WORKFLOW, input);
  await db.truncate();

  progress(`submit(): ${sizes.submitSequential} sequential`);
  let cpu = process.cpuUsage();
  let started = performance.now();
  for (let i = 0; i < sizes.submitSequential; i++) await workflows.submit(NOOP_WORKFLOW, input);
  let seconds = (performance.now() - started) / 1000;
  let cpuPerTask = cpuMs(cpu, process.cpuUsage()) / sizes.submitSequential;
  await expectPending(ctx, sizes.submitSequential);
  raw.sequential = { tasks: sizes.submitSequential, seconds, cpuMsPerTask: cpuPerTask };
  ctx.results.set('submit.sequential', sizes.submitSequential / seconds, `${sizes.submitSequential} tasks; ${cpuNote(cpuPerTask)}`);
  await db.truncate();

  progress(`submit(): ${sizes.submitConcurrent} from ${sizes.submitCallers} concurrent callers`);
  cpu = process.cpuUsage();
  started = performance.now();
  await submitConcurrently(workflows, sizes.submitConcurrent, sizes.submitCallers, input);
  seconds = (performance.now() - started) / 1000;
  cpuPerTask = cpuMs(cpu, process.cpuUsage()) / sizes.submitConcurrent;
  await expectPending(ctx, sizes.submitConcurrent);
  raw.concurrent = { tasks: sizes.submitConcurrent, callers: sizes.submitCallers, seconds, cpuMsPerTask: cpuPerTask };
  ctx.results.set(
    'submit.concurrent',
    sizes.submitConcurrent / seconds,
    `${sizes.submitConcurrent} tasks; pool of 10 connections; ${cpuNote(cpuPerTask)}`,
  );
  await db.truncate();

  progress(`submitMany(): ${sizes.submitBatched} in batches of ${sizes.submitBatchSize}`);
  cpu = process.cpuUsage();
  started = performance.now();
  const tasks = await submitInBatches(workflows, sizes.submitBatched, sizes.submitBatchSize, input);
  seconds = (performance.now() - started) / 1000;
  cpuPerTask = cpuMs(cpu, process.cpuUsage()) / tasks;
  await expectPending(ctx, tasks);
  raw.batched = { tasks, batchSize: sizes.submitBatchSize, seconds, cpuMsPerTask: cpuPerTask };
  ctx.results.set('submit.batched', tasks / seconds, `${tasks} tasks, ${sizes.submitBatchSize} per call; ${cpuNote(cpuPerTask)}`);
  await db.truncate();
}

export async function expectPending(ctx: BenchContext, count: number): Promise<void> {
  const { rows } = await ctx.db.client.query<{ n: string }>(`SELECT count(*) AS n FROM agent_tasks WHERE status = 'pending'`);
  if (Number(rows[0].n) !== count) throw new Error(`expected ${count} pending tasks after submitting, found ${rows[0].n}`);
}

function cpuNote(msPerTask: number): string {
  return `bench process CPU ${msPerTask.toFixed(3)} ms/task`;
}
