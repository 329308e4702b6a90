/**
 * DBOS's side of the burst (issue 33, point 1): `count` workflows of `steps` no-op steps each,
 * started at once with `DBOS.startWorkflow` in this process (DBOS runs a workflow where it is
 * started), timed from the first start to the last result. DBOS at its defaults but its log level.
 * The database (an empty one made for this run) is DBOS's system database.
 *
 *   node bench/peers/dbos-steps.mjs <database url> [count] [steps]
 *
 * Prints one JSON line on stdout. Run by bench/peers-compare.ts.
 */
import { performance } from 'node:perf_hooks';
import { readFileSync } from 'node:fs';
import { DBOS } from '@dbos-inc/dbos-sdk';

const version = JSON.parse(readFileSync(new URL('./node_modules/@dbos-inc/dbos-sdk/package.json', import.meta.url), 'utf8')).version;

const [url, countArg = '1000', stepsArg = '10'] = process.argv.slice(2);
const count = Number(countArg);
const steps = Number(stepsArg);

DBOS.setConfig({ name: 'duraflow-bench-peer', systemDatabaseUrl: url, logLevel: 'error' });

const noop = async () => 1;
const run = DBOS.registerWorkflow(
  async (n) => {
    for (let i = 0; i < n; i++) await DBOS.runStep(noop, { name: `step-${i}` });
    return n;
  },
  { name: 'bench-steps' },
);

async function burst(n) {
  const started = performance.now();
  const handles = await Promise.all(Array.from({ length: n }, () => DBOS.startWorkflow(run)(steps)));
  const results = await Promise.all(handles.map((handle) => handle.getResult()));
  const seconds = (performance.now() - started) / 1000;
  if (results.some((result) => result !== steps)) throw new Error('a workflow returned another result');
  return seconds;
}

await DBOS.launch();
await burst(Math.min(100, count)); // warm-up: connections, the step path optimized
const cpu = process.cpuUsage();
const seconds = await burst(count);
const used = process.cpuUsage(cpu);
const cpuMs = (used.user + used.system) / 1000;
await DBOS.shutdown();
console.log(
  JSON.stringify({
    peer: 'dbos',
    version,
    count,
    steps,
    seconds,
    stepsPerSecond: (count * steps) / seconds,
    cpuPercent: (cpuMs / (seconds * 1000)) * 100,
  }),
);
process.exit(0);
