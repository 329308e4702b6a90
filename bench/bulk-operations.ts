/**
 * Bulk operations (issue 26): cancelMany, then retryMany, of 100,000 tasks, while a worker process
 * drains another workflow. Prints, per operation: its time, { matched, changed }, the longest wait
 * of a concurrent single-row claim that does not skip locked rows (it waits for whatever batch
 * holds the oldest matching row: the bulk's batch is the bound), and the worker's throughput
 * during the operation beside its throughput just before.
 *
 *   node -r ./test/support/swc-register.js bench/bulk-operations.ts [--tasks 100000]
 */
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Client } from 'pg';
import { BulkResult, DURAFLOW_ENTITIES, DuraflowModule, WorkflowService } from '@duraflow/nestjs';
import { stopAllWorkerProcesses } from '../test/support/worker-process';
import { createBenchDatabase } from './database';
import { progress } from './stats';
import { BenchWorkerProcess } from './worker-process';
import { NOOP_WORKFLOW } from './workflows';

const argument = (name: string, fallback: number) => {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? Number(process.argv[at + 1]) : fallback;
};

/** Tasks of a workflow no process registers: nothing claims them but the bulk operations. */
const BULK_WORKFLOW = 'bench-bulk';

async function startSubmitOnlyNode(databaseUrl: string): Promise<INestApplicationContext> {
  @Module({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl, entities: [...DURAFLOW_ENTITIES] }),
      DuraflowModule.forRoot({ worker: { enabled: false }, reaper: { enabled: false } }),
    ],
  })
  class BulkNodeModule {}
  const app = await NestFactory.createApplicationContext(BulkNodeModule, { logger: ['warn', 'error', 'fatal'], abortOnError: false });
  await app.init();
  return app;
}

/** The longest wait of a row lock taken without SKIP LOCKED on the oldest task in `status`, polled until `done`. */
async function probeLockWaits(url: string, status: string, done: () => boolean): Promise<{ longestMs: number; probes: number }> {
  const client = new Client({ connectionString: url });
  await client.connect();
  let longestMs = 0;
  let probes = 0;
  try {
    while (!done()) {
      await client.query('BEGIN');
      const started = performance.now();
      await client.query(`SELECT id FROM agent_tasks WHERE workflow_name = $1 AND status = $2 ORDER BY created_at, id LIMIT 1 FOR UPDATE`, [
        BULK_WORKFLOW,
        status,
      ]);
      longestMs = Math.max(longestMs, performance.now() - started);
      await client.query('ROLLBACK');
      probes++;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  } finally {
    await client.end();
  }
  return { longestMs, probes };
}

async function completed(client: Client): Promise<number> {
  const { rows } = await client.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM agent_tasks WHERE workflow_name = $1 AND status = 'completed'`,
    [NOOP_WORKFLOW],
  );
  return rows[0].n;
}

async function measure(
  name: string,
  url: string,
  client: Client,
  probeStatus: string,
  operation: () => Promise<BulkResult>,
): Promise<string> {
  const before = await completed(client);
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  const baseline = ((await completed(client)) - before) / 3;
  let done = false;
  const probe = probeLockWaits(url, probeStatus, () => done);
  const startCount = await completed(client);
  const started = performance.now();
  const result = await operation();
  const seconds = (performance.now() - started) / 1000;
  done = true;
  const during = ((await completed(client)) - startCount) / seconds;
  const { longestMs, probes } = await probe;
  return (
    `| ${name} | ${seconds.toFixed(2)} s (${Math.round(result.changed / seconds).toLocaleString('en')} tasks/s) | ${result.matched} / ${result.changed} | ` +
    `${longestMs.toFixed(1)} ms (${probes} probes) | ${Math.round(during)} tasks/s (before: ${Math.round(baseline)}) |`
  );
}

async function main(): Promise<void> {
  const tasks = argument('tasks', 100_000);
  const db = await createBenchDatabase();
  const worker = BenchWorkerProcess.start({
    databaseUrl: db.url,
    label: 'drain',
    duraflow: { workerId: `bench-bulk-${randomBytes(3).toString('hex')}`, worker: { enabled: false, concurrency: 10 } },
  });
  let app: INestApplicationContext | undefined;
  try {
    progress(`inserting ${tasks} ${BULK_WORKFLOW} tasks and 400,000 0-step ${NOOP_WORKFLOW} tasks to drain`);
    await db.insertPending(BULK_WORKFLOW, {}, tasks);
    await db.insertPending(NOOP_WORKFLOW, { steps: 0 }, 400_000);
    await db.client.query('ANALYZE agent_tasks');
    app = await startSubmitOnlyNode(db.url);
    const workflows = app.get(WorkflowService);
    await worker.ready;
    await worker.startWorker();

    const rows = [
      await measure(`cancelMany, ${tasks.toLocaleString('en')} pending`, db.url, db.client, 'pending', () =>
        workflows.cancelMany({ workflow: BULK_WORKFLOW, status: 'pending' }),
      ),
      await measure(`retryMany, ${tasks.toLocaleString('en')} cancelled`, db.url, db.client, 'cancelled', () =>
        workflows.retryMany({ workflow: BULK_WORKFLOW, status: 'cancelled' }),
      ),
    ];
    console.log(
      '| operation | time (changed/s) | matched / changed | longest wait of a concurrent non-skipping row lock | worker drain during (before) |',
    );
    console.log('|---|---|---|---|---|');
    for (const row of rows) console.log(row);
  } finally {
    await app?.close();
    await stopAllWorkerProcesses();
    await db.drop();
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
