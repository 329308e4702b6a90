/**
 * Where a submit's time goes (issue 33, point 2), on one Nest app (worker off, reaper off) on a
 * fresh database of the test server, every figure in the same minutes (the samples of each round
 * taken in turn, one of each, so a change of load hits them alike):
 *
 * - `submit()`: `WorkflowService.submit('bench-noop', { steps: 0 })`, awaited;
 * - validation and serialization: `TaskFactory.prepare` alone (name, options, input checked and
 *   serialized, trace context captured): what a submit does before its round trip;
 * - the library's INSERT: the create move alone (`TaskTransitions.create` of a prepared task: the
 *   INSERT with its NOTIFY, one round trip on the DataSource's pg pool, the row mapped back);
 * - a lone node-postgres INSERT of the same row (the same columns and values, prepared, no
 *   NOTIFY) on a plain `pg.Client`: the floor; and the same with `pg_notify` (what a NOTIFY adds);
 * - the same lone INSERT through TypeORM's `DataSource.query` (what TypeORM adds to a round trip).
 *
 * p50 (p90) of `--samples` rounds (default 400) after 50 warm-up rounds. Then throughput with 50
 * callers in flight, each submitting one task after the other for `--seconds` (default 3): through
 * `submit()` (group-committed) and through the old path (prepare, then the create move on its own,
 * one statement per task), in turn. Not part of `npm run bench`:
 *
 *   node -r ./test/support/swc-register.js bench/submit-split.ts [--samples 400] [--seconds 3]
 *
 * Figures in bench/README.md ("Submit (issue 33)").
 */
import 'reflect-metadata';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { getDataSourceToken } from '@nestjs/typeorm';
import { WorkflowService } from '@duraflow/nestjs';
import { TaskFactory } from '@duraflow/nestjs/execution/task-factory';
import { TaskTransitions } from '@duraflow/nestjs/persistence/lifecycle/task-transitions';
import { TestBed } from '../test/support/test-bed';
import { progress, quantile } from './stats';
import { NOOP_WORKFLOW, noopWorkflow } from './workflows';

const flag = (name: string, fallback: number) => {
  const index = process.argv.indexOf(name);
  return index > 0 ? Number(process.argv[index + 1]) : fallback;
};
const SAMPLES = flag('--samples', 400);
const SECONDS = flag('--seconds', 3);
const WARMUP = 50;
const CALLERS = 50;
const INPUT = { steps: 0 };

const LONE_INSERT = `INSERT INTO agent_tasks (workflow_name, input, priority, max_retries, tags) VALUES ($1, $2::jsonb, 0, 3, '{}'::jsonb)`;
const LONE_INSERT_NOTIFY = `WITH inserted AS (${LONE_INSERT} RETURNING workflow_name) SELECT pg_notify('duraflow_task_submitted', workflow_name) FROM inserted`;

async function time(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

async function inFlight(submit: () => Promise<unknown>): Promise<number> {
  let done = 0;
  const until = performance.now() + SECONDS * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CALLERS }, async () => {
      while (performance.now() < until) {
        await submit();
        done++;
      }
    }),
  );
  return done / ((performance.now() - started) / 1000);
}

async function main(): Promise<void> {
  const bed = new TestBed();
  const db = await bed.setUp({ prefix: 'duraflow_bench' });
  const plain = new Client({ connectionString: db.url });
  await plain.connect();
  try {
    const app = await bed.start({ duraflow: { workflows: [noopWorkflow], worker: { enabled: false }, reaper: { enabled: false } } });
    const workflows = app.get(WorkflowService);
    const factory = app.get(TaskFactory, { strict: false });
    const transitions = app.get(TaskTransitions, { strict: false });
    const dataSource = app.get<DataSource>(getDataSourceToken());
    const inputJson = JSON.stringify(INPUT);
    const figures: Record<string, number[]> = {
      'submit()': [],
      'validation and serialization (TaskFactory.prepare)': [],
      "the library's INSERT + NOTIFY (create move, pool)": [],
      'lone INSERT, node-postgres': [],
      'lone INSERT + pg_notify, node-postgres': [],
      'lone INSERT, TypeORM DataSource.query': [],
    };
    const round = async (keep: boolean) => {
      const samples = [
        await time(() => workflows.submit(NOOP_WORKFLOW, INPUT)),
        await time(() => factory.prepare(NOOP_WORKFLOW, INPUT)),
        await factory.prepare(NOOP_WORKFLOW, INPUT).then((task) => time(() => transitions.create(task))),
        await time(() => plain.query({ name: 'bench_lone_insert', text: LONE_INSERT, values: [NOOP_WORKFLOW, inputJson] })),
        await time(() => plain.query({ name: 'bench_lone_insert_notify', text: LONE_INSERT_NOTIFY, values: [NOOP_WORKFLOW, inputJson] })),
        await time(() => dataSource.query(LONE_INSERT, [NOOP_WORKFLOW, inputJson])),
      ];
      if (keep) Object.values(figures).forEach((list, index) => list.push(samples[index]));
    };
    progress(`submit split: ${WARMUP} warm-up rounds, ${SAMPLES} measured`);
    for (let i = 0; i < WARMUP; i++) await round(false);
    for (let i = 0; i < SAMPLES; i++) await round(true);
    const loneP50 = quantile(figures['lone INSERT, node-postgres'], 0.5);
    const lines = ['| part of a submit | p50 | p90 | p50 ÷ lone INSERT |', '|---|---|---|---|'];
    for (const [name, samples] of Object.entries(figures)) {
      const p50 = quantile(samples, 0.5);
      lines.push(`| ${name} | ${p50.toFixed(3)} ms | ${quantile(samples, 0.9).toFixed(3)} ms | ${(p50 / loneP50).toFixed(2)}× |`);
    }
    progress(`${CALLERS} callers in flight, ${SECONDS} s each, in turn`);
    const grouped: number[] = [];
    const alone: number[] = [];
    for (let i = 0; i < 3; i++) {
      grouped.push(await inFlight(() => workflows.submit(NOOP_WORKFLOW, INPUT)));
      alone.push(await inFlight(async () => transitions.create(await factory.prepare(NOOP_WORKFLOW, INPUT))));
    }
    const sorted = (list: number[]) => [...list].sort((a, b) => a - b);
    const describe = (list: number[]) => `${Math.round(quantile(list, 0.5))} (${sorted(list).map(Math.round).join(', ')})`;
    lines.push(
      '',
      `| ${CALLERS} submits in flight | tasks/s, median (3 runs) |`,
      '|---|---|',
      `| submit() (group commit) | ${describe(grouped)} |`,
      `| one statement per task (prepare + create move) | ${describe(alone)} |`,
      `| ratio | ${(quantile(grouped, 0.5) / quantile(alone, 0.5)).toFixed(2)}× |`,
    );
    process.stdout.write(
      `${lines.join('\n')}\n\n${new Date().toISOString().slice(0, 16)} UTC, load average ${os
        .loadavg()
        .map((n) => n.toFixed(1))
        .join(' ')}\n`,
    );
  } finally {
    await plain.end();
    await bed.tearDown();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
