/**
 * Talking to a running run (issue 27): what events and streams cost, on one in-process worker
 * (the writer, the readers and the clock in one process). Not part of `npm run bench`:
 *
 *   node -r ./test/support/swc-register.js bench/talk-to-run.ts [--chunks 2000] [--runs 20]
 *
 * - stream write throughput: chunks/s of one run writing `--chunks` chunks (tokens of 16
 *   characters) until all are committed (its closeStream resolved), from the body (queued, group
 *   committed in the background) and from one step (all of them with the step's checkpoint),
 *   without and with a reader following live;
 * - chunk commit → reader: from the statement that wrote a chunk returning (committed) to the live
 *   reader getting the chunk, one chunk every 5 ms (the store's method is wrapped to see it);
 * - setEvent → getEvent: from the statement of `ctx.setEvent` returning to a waiting
 *   `workflows.getEvent` resolving (it can be first: the NOTIFY and the reply race), next to the
 *   same runs' submit → start (from `submit` resolving to the run function's first line).
 *
 * Figures in bench/README.md, "Events and streams".
 */
import 'reflect-metadata';
import { performance } from 'node:perf_hooks';
import { workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { TestBed } from '../test/support/test-bed';
import { RunEventStore } from '../libs/duraflow/src/persistence/run-event.store';
import { StreamStore } from '../libs/duraflow/src/persistence/stream.store';
import { median, progress, quantile } from './stats';

const flag = (name: string, fallback: number) => {
  const at = process.argv.indexOf(name);
  return at > 0 ? Number(process.argv[at + 1]) : fallback;
};
const CHUNKS = flag('--chunks', 2_000);
const RUNS = flag('--runs', 20);
const EVENTS_PER_RUN = 5;
const TOKEN = 'x'.repeat(16);

/** Per task: when its run started, its writes' spans, its chunks' commit times, its events' set times. */
const started = new Map<string, number>();
const writeSpans = new Map<string, number>();
const committedAt = new Map<string, number[]>();
const setAt = new Map<string, number[]>();
const gates = new Map<string, Array<() => void>>();

const writer = workflow('talk-writer', async (ctx: WorkflowContext<{ chunks: number; inStep: boolean }>) => {
  const first = performance.now();
  const write = async () => {
    for (let i = 0; i < ctx.input.chunks; i++) await ctx.writeStream('tokens', TOKEN);
  };
  if (ctx.input.inStep) await ctx.step.run('write', write);
  else await write();
  await ctx.closeStream('tokens'); // resolves once every chunk before it is written
  writeSpans.set(ctx.runId, performance.now() - first);
});

const paced = workflow('talk-paced', async (ctx: WorkflowContext<{ chunks: number }>) => {
  for (let i = 0; i < ctx.input.chunks; i++) {
    await new Promise((resolve) => setTimeout(resolve, 5));
    await ctx.writeStream('tokens', i);
  }
  await ctx.closeStream('tokens');
});

const eventful = workflow('talk-events', async (ctx: WorkflowContext) => {
  started.set(ctx.runId, performance.now());
  for (let i = 0; i < EVENTS_PER_RUN; i++) {
    await new Promise<void>((resolve) => (gates.get(ctx.runId) ?? gates.set(ctx.runId, []).get(ctx.runId)!).push(resolve));
    await ctx.setEvent(`e${i}`, i);
  }
});

/** Sees when the statements that write chunks and events return (committed). */
function instrument(streams: StreamStore, events: RunEventStore): void {
  const appendBodyChunks = streams.appendBodyChunks.bind(streams);
  streams.appendBodyChunks = async (taskId, claimToken, chunks) => {
    const owned = await appendBodyChunks(taskId, claimToken, chunks);
    const now = performance.now();
    const times = committedAt.get(taskId) ?? committedAt.set(taskId, []).get(taskId)!;
    for (const chunk of chunks) times[Number(chunk.origin.slice(2))] = now;
    return owned;
  };
  const set = events.set.bind(events);
  events.set = async (taskId, claimToken, key, valueJson, position) => {
    const owned = await set(taskId, claimToken, key, valueJson, position);
    (setAt.get(taskId) ?? setAt.set(taskId, []).get(taskId)!)[Number(key.slice(1))] = performance.now();
    return owned;
  };
}

async function drain(workflows: WorkflowService, taskId: string, arrivals?: number[]): Promise<number> {
  let count = 0;
  for await (const chunk of workflows.readStream(taskId, 'tokens')) {
    count++;
    if (arrivals) arrivals[chunk.seq] = performance.now();
  }
  return count;
}

async function throughput(workflows: WorkflowService, inStep: boolean, withReader: boolean): Promise<number> {
  const task = await workflows.submit('talk-writer', { chunks: CHUNKS, inStep });
  const reading = withReader ? drain(workflows, task.id) : Promise.resolve(CHUNKS);
  await workflows.waitFor(task.id, { timeoutMs: 600_000 });
  if ((await reading) !== CHUNKS) throw new Error('the reader missed chunks');
  return CHUNKS / (writeSpans.get(task.id)! / 1000);
}

async function commitToReader(workflows: WorkflowService): Promise<number[]> {
  const chunks = 400;
  const task = await workflows.submit('talk-paced', { chunks });
  const arrivals: number[] = [];
  await drain(workflows, task.id, arrivals);
  // A body chunk's origin is its position: in this run, chunk seq n is at position n.
  const commits = committedAt.get(task.id)!;
  // The first chunks may be read before the reader is live (a first page): only live ones count.
  return arrivals.slice(11).map((arrival, i) => arrival - commits[i + 11]);
}

async function eventLatencies(workflows: WorkflowService): Promise<{ setToGet: number[]; submitToStart: number[] }> {
  const setToGet: number[] = [];
  const submitToStart: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const task = await workflows.submit('talk-events', {});
    const submitted = performance.now();
    for (let i = 0; i < EVENTS_PER_RUN; i++) {
      const waiting = workflows.getEvent(task.id, `e${i}`, { timeoutMs: 30_000 });
      await new Promise((resolve) => setTimeout(resolve, 20)); // the getEvent waits by now
      while (!gates.get(task.id)?.[i]) await new Promise((resolve) => setTimeout(resolve, 1));
      gates.get(task.id)![i]();
      await waiting;
      const got = performance.now();
      // The statement's reply, if the NOTIFY and the getEvent's read came first.
      while (setAt.get(task.id)?.[i] === undefined) await new Promise((resolve) => setImmediate(resolve));
      setToGet.push(got - setAt.get(task.id)![i]);
    }
    submitToStart.push(started.get(task.id)! - submitted);
    await workflows.waitFor(task.id, { timeoutMs: 30_000 });
  }
  return { setToGet, submitToStart };
}

async function main(): Promise<void> {
  const bed = new TestBed();
  await bed.setUp({ prefix: 'duraflow_bench' });
  try {
    const app = await bed.start({
      duraflow: {
        workflows: [writer, paced, eventful],
        streams: { maxChunksPerTask: CHUNKS * 2 },
        worker: { pollIntervalMs: 50 },
        reaper: { enabled: false },
      },
    });
    const workflows = app.get(WorkflowService);
    instrument(app.get(StreamStore), app.get(RunEventStore));
    const fmt = (ms: number) => ms.toFixed(2);
    progress('warm-up');
    await throughput(workflows, false, true);
    console.log(`| stream writes of one run (${CHUNKS} chunks) | chunks/s |`);
    console.log('|---|---|');
    for (const inStep of [false, true]) {
      for (const withReader of [false, true]) {
        progress(`throughput: ${inStep ? 'in a step' : 'in the body'}, ${withReader ? 'with' : 'without'} a reader`);
        const rate = await throughput(workflows, inStep, withReader);
        console.log(
          `| ${inStep ? 'inside one step (written with its checkpoint)' : 'from the body (group committed)'}, ${withReader ? 'with a live reader' : 'no reader'} | ${Math.round(rate)} |`,
        );
      }
    }
    progress('chunk commit → reader');
    const lags = await commitToReader(workflows);
    progress('setEvent → getEvent');
    const { setToGet, submitToStart } = await eventLatencies(workflows);
    console.log('\n| latency | p50 | p90 | samples |');
    console.log('|---|---|---|---|');
    const row = (label: string, samples: number[]) =>
      console.log(`| ${label} | ${fmt(median(samples))} ms | ${fmt(quantile(samples, 0.9))} ms | ${samples.length} |`);
    row('chunk commit → live reader', lags);
    row('setEvent → waiting getEvent', setToGet);
    row('submit → start (the same runs)', submitToStart);
  } finally {
    await bed.tearDown();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
