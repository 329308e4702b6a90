/**
 * graphile-worker's side of the drain (issue 33, point 3): `count` jobs of a no-op task added
 * through its API (`addJobs`, batches of 100) with no worker running (not timed), then drained by
 * one runner in this process, "batched" as graphile-worker's performance guide sets it: a local
 * queue (`localQueue.size`, jobs fetched and locked in batches) and completions written together
 * (`completeJobBatchDelay: 0`). Timed from the runner's start to the last job's success.
 *
 *   node bench/peers/graphile-drain.mjs <database url> [count] [concurrency] [localQueueSize]
 *
 * Prints one JSON line on stdout. Run by bench/peers-compare.ts.
 */
import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { Logger, makeWorkerUtils, run } from 'graphile-worker';

const version = JSON.parse(readFileSync(new URL('./node_modules/graphile-worker/package.json', import.meta.url), 'utf8')).version;
const [url, countArg = '20000', concurrencyArg = '10', queueArg = '500'] = process.argv.slice(2);
const count = Number(countArg);
const concurrency = Number(concurrencyArg);
const localQueueSize = Number(queueArg);
const logger = new Logger(() => (level, message) => {
  if (level === 'error') console.error(message);
});

const utils = await makeWorkerUtils({ connectionString: url, logger });
await utils.migrate();
const addStarted = performance.now();
for (let added = 0; added < count; added += 100) {
  const specs = Array.from({ length: Math.min(100, count - added) }, (_, i) => ({ identifier: 'noop', payload: { n: added + i } }));
  await utils.addJobs(specs);
}
const addSeconds = (performance.now() - addStarted) / 1000;
await utils.release();

const events = new EventEmitter();
let done = 0;
let finished;
const allDone = new Promise((resolve) => (finished = resolve));
events.on('job:success', () => {
  if (++done === count) finished();
});
const cpu = process.cpuUsage();
const started = performance.now();
const runner = await run({
  connectionString: url,
  concurrency,
  noHandleSignals: true,
  pollInterval: 500,
  logger,
  events,
  taskList: { noop: async () => undefined },
  preset:
    localQueueSize > 1 ? { worker: { localQueue: { size: localQueueSize }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } } : undefined,
});
await allDone;
const seconds = (performance.now() - started) / 1000;
const used = process.cpuUsage(cpu);
await runner.stop();
console.log(
  JSON.stringify({
    peer: 'graphile-worker',
    version,
    count,
    concurrency,
    localQueueSize,
    addSeconds,
    seconds,
    tasksPerSecond: count / seconds,
    cpuPercent: ((used.user + used.system) / 1000 / (seconds * 1000)) * 100,
  }),
);
process.exit(0);
