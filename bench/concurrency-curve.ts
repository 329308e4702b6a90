/**
 * Throughput and latency against the worker's concurrency (issue 33, point 1): one worker process
 * per concurrency (10, 25, 50, 100, 200, 500, and the library's default, given no number),
 * production defaults otherwise (pool of 10, prefetch 'auto', poll 500 ms), draining a burst
 * inserted at once while its worker is stopped, for three workloads:
 *
 * - `0-step`: 5,000 tasks of `bench-noop` with no step (the claim and the completion alone);
 * - `10-step`: 1,000 tasks of 10 no-op steps (the issue's burst: steps/s is its figure);
 * - `waiting`: 1,000 tasks of 1 step whose body waits 50 ms (a call to another service).
 *
 * Per cell: tasks/s (and steps/s) from the worker's start to the last completion it reports;
 * a run's own time (started_at -> completed_at) p50 and p95 (how much longer each run takes when
 * more run at once: where latency turns); the burst's p95 (worker start -> completed_at); the
 * worker process's CPU as % of one core. Prints one Markdown table and writes an SVG plot (the
 * throughput of each workload relative to its concurrency-10 figure, and the run p95, against
 * concurrency on a log axis). Not part of `npm run bench`:
 *
 *   node -r ./test/support/swc-register.js bench/concurrency-curve.ts [--runs 3] [--quick] [--svg docs/images/concurrency-curve.svg]
 *
 * Figures in bench/README.md ("Concurrency curve (issue 33)") and docs/workers.md.
 */
import 'reflect-metadata';
import { writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import { DURAFLOW_DEFAULTS } from '@duraflow/nestjs';
import { eventually } from '../test/support/waiting';
import { BenchDatabase, createBenchDatabase } from './database';
import { cpuMs, progress } from './stats';
import { BenchWorkerProcess } from './worker-process';
import { NOOP_WORKFLOW, WAITING_WORKFLOW } from './workflows';

interface Workload {
  name: string;
  workflow: string;
  input: Record<string, number>;
  steps: number;
  tasks: number;
}

interface Cell {
  workload: string;
  concurrency: number | 'default';
  tasks: number;
  seconds: number;
  tasksPerSecond: number;
  stepsPerSecond: number;
  runP50Ms: number;
  runP95Ms: number;
  burstP95Ms: number;
  workerCpuPercent: number;
}

const quick = process.argv.includes('--quick');
const runsArg = process.argv.indexOf('--runs');
/** Whole runs of the grid, one after the other: each cell's figures are the median (and min–max) over them. */
const RUNS = runsArg > 0 ? Number(process.argv[runsArg + 1]) : 1;
const svgArg = process.argv.indexOf('--svg');
const SVG_PATH = path.resolve(svgArg > 0 ? process.argv[svgArg + 1] : 'docs/images/concurrency-curve.svg');
const CONCURRENCIES: Array<number | 'default'> = quick ? [10, 100, 'default'] : [10, 25, 50, 100, 200, 500, 'default'];
const WORKLOADS: Workload[] = [
  { name: '0-step', workflow: NOOP_WORKFLOW, input: { steps: 0 }, steps: 0, tasks: quick ? 300 : 5_000 },
  { name: '10-step', workflow: NOOP_WORKFLOW, input: { steps: 10 }, steps: 10, tasks: quick ? 100 : 1_000 },
  { name: 'waiting', workflow: WAITING_WORKFLOW, input: { steps: 1, waitMs: 50 }, steps: 1, tasks: quick ? 100 : 1_000 },
];

async function bootWorker(db: BenchDatabase, concurrency: number | 'default'): Promise<BenchWorkerProcess> {
  const worker = BenchWorkerProcess.start({
    databaseUrl: db.url,
    label: `c${concurrency}`,
    duraflow: {
      workerId: `curve-c${concurrency}-${randomBytes(3).toString('hex')}`,
      worker: { enabled: false, ...(concurrency === 'default' ? {} : { concurrency }) },
    },
  });
  await worker.ready;
  return worker;
}

async function drain(db: BenchDatabase, worker: BenchWorkerProcess, workload: Workload, concurrency: number | 'default'): Promise<Cell> {
  await db.truncate();
  await db.insertPending(workload.workflow, workload.input, workload.tasks);
  await db.client.query('ANALYZE agent_tasks');
  await db.client.query('CHECKPOINT');
  const before = (await worker.stats()).completed;
  const cpuBefore = await worker.cpuUsage();
  const { rows: clock } = await db.client.query<{ at: Date }>('SELECT clock_timestamp() AS at');
  const started = performance.now();
  await worker.startWorker();
  await eventually(
    `${workload.tasks} ${workload.name} tasks completed`,
    async () => (await worker.stats()).completed - before >= workload.tasks,
    {
      timeoutMs: 900_000,
      everyMs: 20,
    },
  );
  const seconds = (performance.now() - started) / 1000;
  const cpu = cpuMs(cpuBefore, await worker.cpuUsage());
  await worker.stopWorker();
  const { rows } = await db.client.query<{ done: string; run50: number; run95: number; burst95: number }>(
    `SELECT count(*) FILTER (WHERE status = 'completed') AS done,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM completed_at - started_at)) * 1000 AS run50,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM completed_at - started_at)) * 1000 AS run95,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM completed_at - $1::timestamptz)) * 1000 AS burst95
     FROM agent_tasks`,
    [clock[0].at],
  );
  if (Number(rows[0].done) !== workload.tasks)
    throw new Error(`${workload.name} at ${concurrency}: ${rows[0].done} of ${workload.tasks} completed`);
  return {
    workload: workload.name,
    concurrency,
    tasks: workload.tasks,
    seconds,
    tasksPerSecond: workload.tasks / seconds,
    stepsPerSecond: (workload.tasks * workload.steps) / seconds,
    runP50Ms: rows[0].run50,
    runP95Ms: rows[0].run95,
    burstP95Ms: rows[0].burst95,
    workerCpuPercent: (cpu / (seconds * 1000)) * 100,
  };
}

/** Each cell's median over the runs (by throughput), with the throughput's min and max. */
function medians(cells: Cell[]): Array<Cell & { min: number; max: number }> {
  const groups = new Map<string, Cell[]>();
  for (const cell of cells) {
    const key = `${cell.workload}|${cell.concurrency}`;
    groups.set(key, [...(groups.get(key) ?? []), cell]);
  }
  return [...groups.values()].map((group) => {
    const sorted = [...group].sort((a, b) => a.tasksPerSecond - b.tasksPerSecond);
    return { ...sorted[Math.floor((sorted.length - 1) / 2)], min: sorted[0].tasksPerSecond, max: sorted[sorted.length - 1].tasksPerSecond };
  });
}

function table(cells: Array<Cell & { min: number; max: number }>): string {
  const lines = [
    '| workload | concurrency | tasks/s (min–max) | steps/s | run p50 | run p95 | burst p95 | worker CPU |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const cell of cells) {
    const concurrency = cell.concurrency === 'default' ? `default (${DURAFLOW_DEFAULTS.worker.concurrency})` : String(cell.concurrency);
    const spread = RUNS > 1 ? ` (${Math.round(cell.min)}–${Math.round(cell.max)})` : '';
    lines.push(
      `| ${cell.workload} | ${concurrency} | ${Math.round(cell.tasksPerSecond)}${spread} | ${cell.stepsPerSecond ? Math.round(cell.stepsPerSecond) : '–'} | ` +
        `${cell.runP50Ms.toFixed(1)} ms | ${cell.runP95Ms.toFixed(1)} ms | ${Math.round(cell.burstP95Ms)} ms | ${Math.round(cell.workerCpuPercent)} % |`,
    );
  }
  return lines.join('\n');
}

const COLOURS = ['#1f77b4', '#d62728', '#2ca02c'];

/**
 * Two panels side by side, concurrency on a log axis: throughput relative to each workload's
 * concurrency-10 figure, and the run p95 (ms, log axis). A small writer of its own: no plotting
 * dependency for one picture.
 */
function svg(cells: Cell[], title: string): string {
  const numeric = cells.filter((cell): cell is Cell & { concurrency: number } => typeof cell.concurrency === 'number');
  const xs = [...new Set(numeric.map((cell) => cell.concurrency))].sort((a, b) => a - b);
  const workloads = [...new Set(numeric.map((cell) => cell.workload))];
  const width = 360;
  const height = 240;
  const pad = { left: 52, right: 24, top: 28, bottom: 40 };
  const logX = (x: number) =>
    pad.left + ((Math.log(x) - Math.log(xs[0])) / (Math.log(xs[xs.length - 1]) - Math.log(xs[0]) || 1)) * (width - pad.left - pad.right);
  const panel = (offset: number, heading: string, value: (cell: Cell) => number, logY: boolean): string => {
    const values = numeric.map(value).filter((v) => v > 0);
    const lo = logY ? Math.min(...values) : 0;
    const hi = Math.max(...values);
    const y = (v: number) =>
      height -
      pad.bottom -
      (logY ? (Math.log(v) - Math.log(lo)) / (Math.log(hi) - Math.log(lo) || 1) : v / (hi || 1)) * (height - pad.top - pad.bottom);
    const ticksY = logY ? [lo, Math.sqrt(lo * hi), hi] : [0, hi / 2, hi];
    const parts = [
      `<g transform="translate(${offset},0)">`,
      `<text x="${width / 2}" y="16" text-anchor="middle" font-weight="bold">${heading}</text>`,
      `<line x1="${pad.left}" y1="${height - pad.bottom}" x2="${width - pad.right}" y2="${height - pad.bottom}" stroke="#888"/>`,
      `<line x1="${pad.left}" y1="${pad.top}" x2="${pad.left}" y2="${height - pad.bottom}" stroke="#888"/>`,
      ...xs.map((x) => `<text x="${logX(x).toFixed(1)}" y="${height - pad.bottom + 14}" text-anchor="middle">${x}</text>`),
      `<text x="${width / 2}" y="${height - 6}" text-anchor="middle">concurrency</text>`,
      ...ticksY.map(
        (v) => `<text x="${pad.left - 4}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${v >= 10 ? Math.round(v) : v.toFixed(1)}</text>`,
      ),
    ];
    workloads.forEach((workload, index) => {
      const points = numeric
        .filter((cell) => cell.workload === workload && value(cell) > 0)
        .sort((a, b) => a.concurrency - b.concurrency)
        .map((cell) => `${logX(cell.concurrency).toFixed(1)},${y(value(cell)).toFixed(1)}`);
      parts.push(`<polyline fill="none" stroke="${COLOURS[index % COLOURS.length]}" stroke-width="2" points="${points.join(' ')}"/>`);
      for (const point of points) {
        const [cx, cy] = point.split(',');
        parts.push(`<circle cx="${cx}" cy="${cy}" r="3" fill="${COLOURS[index % COLOURS.length]}"/>`);
      }
    });
    parts.push('</g>');
    return parts.join('\n');
  };
  const base = new Map(numeric.filter((cell) => cell.concurrency === xs[0]).map((cell) => [cell.workload, cell.tasksPerSecond]));
  const legend = workloads
    .map(
      (workload, index) =>
        `<text x="${60 + index * 140}" y="${height + 20}" fill="${COLOURS[index % COLOURS.length]}">■ ${workload}</text>`,
    )
    .join('\n');
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width * 2}" height="${height + 50}" font-family="sans-serif" font-size="11" role="img">`,
    `<title>${title}</title>`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    panel(0, `throughput (× concurrency ${xs[0]})`, (cell) => cell.tasksPerSecond / (base.get(cell.workload) ?? 1), false),
    panel(width, 'run time p95 (ms, log)', (cell) => cell.runP95Ms, true),
    legend,
    `<text x="${width * 2 - 10}" y="${height + 40}" text-anchor="end" fill="#666">${escapeXml(title)}</text>`,
    '</svg>',
    '',
  ].join('\n');
}

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

async function main(): Promise<void> {
  const db = await createBenchDatabase();
  const cells: Cell[] = [];
  try {
    for (let run = 1; run <= RUNS; run++) {
      for (const concurrency of CONCURRENCIES) {
        progress(`run ${run} of ${RUNS}, concurrency ${concurrency}: booting a worker process`);
        const worker = await bootWorker(db, concurrency);
        try {
          for (const workload of WORKLOADS) {
            progress(`run ${run}, concurrency ${concurrency}: ${workload.tasks} ${workload.name} tasks`);
            cells.push(await drain(db, worker, workload, concurrency));
          }
        } finally {
          await worker.stop();
        }
      }
    }
  } finally {
    await db.drop();
  }
  const ordered = WORKLOADS.flatMap((workload) => medians(cells).filter((cell) => cell.workload === workload.name));
  process.stdout.write(`${table(ordered)}\n`);
  const load = (await import('node:os')).loadavg().map((n) => n.toFixed(1));
  const title = `Duraflow concurrency curve, ${RUNS === 1 ? 'one run' : `median of ${RUNS} runs`}, ${new Date().toISOString().slice(0, 16)} UTC, load average ${load.join(' ')}`;
  mkdirSync(path.dirname(SVG_PATH), { recursive: true });
  writeFileSync(SVG_PATH, svg(ordered, title));
  process.stdout.write(`\n${title}\nplot: ${SVG_PATH}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
