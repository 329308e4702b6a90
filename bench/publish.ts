/**
 * Events that start workflows (issue 28): what publish costs and how fast its tasks start, on one
 * in-process worker (publisher, worker and closer in one process). Not part of `npm run bench`:
 *
 *   node -r ./test/support/swc-register.js bench/publish.ts [--samples 200] [--burst 10000] [--keys 100]
 *
 * - publish → task start: from `workflows.publish` resolving (committed) to the subscribing
 *   workflow's first line, one event at a time (p50, p95);
 * - fan-out burst: `--burst` events published (32 at a time) to two subscribing workflows:
 *   events/s recorded (both tasks created in the publish's transaction), and until every task ran;
 * - debounced burst: `--burst` events over `--keys` keys (32 at a time) to a workflow with a
 *   debounce of 5 s: tasks started (one per key when the burst is one quiet period per key),
 *   and the time from the last publish to the last task started.
 *
 * Figures in bench/README.md, "Events that start workflows".
 */
import 'reflect-metadata';
import { performance } from 'node:perf_hooks';
import { workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { TestBed } from '../test/support/test-bed';
import { median, progress, quantile } from './stats';

const flag = (name: string, fallback: number) => {
  const at = process.argv.indexOf(name);
  return at > 0 ? Number(process.argv[at + 1]) : fallback;
};
const SAMPLES = flag('--samples', 200);
const BURST = flag('--burst', 10_000);
const KEYS = flag('--keys', 100);
const IN_FLIGHT = 32;
/** Longer than a key's gap between events while the burst is published (100 keys at a loaded machine's rate): one quiet period per key. */
const DEBOUNCE_MS = 5_000;

const startedAt = new Map<string, number>();
let fanOutRuns = 0;
let debouncedRuns = 0;
let lastDebouncedStart = 0;

const first = workflow('bench-first', async (ctx: WorkflowContext<{ i: number }>) => void startedAt.set(ctx.runId, performance.now()), {
  on: 'bench.ping',
});
const fanA = workflow('bench-fan-a', async () => void fanOutRuns++, { on: 'bench.burst' });
const fanB = workflow('bench-fan-b', async () => void fanOutRuns++, { on: 'bench.burst' });
const debounced = workflow(
  'bench-debounced',
  async () => {
    debouncedRuns++;
    lastDebouncedStart = performance.now();
  },
  { on: 'bench.changed', debounce: { key: 'key', periodMs: DEBOUNCE_MS } },
);

async function inBatches(count: number, publish: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < count) await publish(next++);
    }),
  );
}

async function until(what: string, done: () => boolean | Promise<boolean>, timeoutMs = 600_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function publishToStart(workflows: WorkflowService): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const result = await workflows.publish('bench.ping', { i });
    const published = performance.now();
    const taskId = result.deliveries[0].taskId!;
    await until('the run started', () => startedAt.has(taskId), 30_000);
    latencies.push(startedAt.get(taskId)! - published);
  }
  return latencies;
}

async function main(): Promise<void> {
  const bed = new TestBed();
  await bed.setUp({ prefix: 'duraflow_bench' });
  try {
    const app = await bed.start({
      duraflow: { workflows: [first, fanA, fanB, debounced], worker: { concurrency: 50 }, events: { groupPollIntervalMs: 100 } },
    });
    const workflows = app.get(WorkflowService);

    progress(`publish → task start, ${SAMPLES} events one at a time`);
    const latencies = await publishToStart(workflows);

    progress(`fan-out burst: ${BURST} events to two workflows`);
    const burstStart = performance.now();
    await inBatches(BURST, (i) => workflows.publish('bench.burst', { i }));
    const burstPublished = performance.now() - burstStart;
    await until('every fan-out task ran', () => fanOutRuns >= 2 * BURST);
    const burstRan = performance.now() - burstStart;

    progress(`debounced burst: ${BURST} events over ${KEYS} keys`);
    const debounceStart = performance.now();
    await inBatches(BURST, (i) => workflows.publish('bench.changed', { key: `k${i % KEYS}`, i }));
    const lastPublish = performance.now();
    const groups = async () =>
      (await bed.db.client.query(`SELECT count(*)::int AS n FROM duraflow_event_groups WHERE started_at IS NULL`)).rows[0].n === 0;
    await until('every debounce started', groups);
    const tasks = (await bed.db.client.query(`SELECT count(*)::int AS n FROM agent_tasks WHERE workflow_name = 'bench-debounced'`)).rows[0]
      .n;
    await until('every debounced task ran', () => debouncedRuns >= tasks);

    console.log(`| measure | value |
|---|---|
| publish → task start, p50 / p95 (${SAMPLES} events) | ${median(latencies).toFixed(1)} ms / ${quantile(latencies, 0.95).toFixed(1)} ms |
| fan-out burst, ${BURST} events × 2 workflows: published | ${Math.round(BURST / (burstPublished / 1000))} events/s (${(burstPublished / 1000).toFixed(1)} s) |
| fan-out burst: until all ${2 * BURST} tasks ran | ${(burstRan / 1000).toFixed(1)} s |
| debounced burst, ${BURST} events over ${KEYS} keys: published | ${Math.round(BURST / ((lastPublish - debounceStart) / 1000))} events/s |
| debounced burst: tasks started | ${tasks} |
| debounced burst: last publish → last task started (debounce ${DEBOUNCE_MS} ms) | ${((lastDebouncedStart - lastPublish) / 1000).toFixed(2)} s |`);
  } finally {
    await bed.tearDown();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
