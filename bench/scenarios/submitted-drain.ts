import { performance } from 'node:perf_hooks';
import { WorkflowService } from '@duraflow/nestjs';
import { startBenchApp } from '../app';
import { BenchContext, rawSection } from '../context';
import { createBenchDatabase } from '../database';
import { SUBMITTED_DRAINS } from '../rows';
import { progress } from '../stats';
import { BenchWorkerProcess } from '../worker-process';
import { RunProbe } from '../workflows';
import { bootWorkers, describeCpu, timeDrain } from './drain';
import { expectPending, submitConcurrently, submitInBatches } from './submit';

/**
 * What users do right after a deployment: 0-step tasks submitted through the API (submit()
 * from concurrent callers, submitMany() in batches) into a new database whose statistics were
 * never gathered, then drained by one worker process at concurrency 10; and the same with an
 * ANALYZE just before the drain. Autovacuum is off for the table, so nothing analyzes it
 * during the run whatever the server's setting.
 */
export async function submittedDrainScenario(ctx: BenchContext): Promise<void> {
  const db = await createBenchDatabase();
  try {
    await db.client.query('ALTER TABLE agent_tasks SET (autovacuum_enabled = false)');
    await submittedDrains({ ...ctx, db }, rawSection(ctx, 'submittedDrain'));
  } finally {
    await db.drop();
  }
}

/** 0-step tasks submitted through the API, then drained by one worker process at concurrency 10. */
async function submittedDrains(ctx: BenchContext, raw: Record<string, unknown>): Promise<void> {
  const { db, sizes } = ctx;
  const count = sizes.submittedDrainTasks;
  const app = await startBenchApp(db.url, new RunProbe());
  let workers: BenchWorkerProcess[] = [];
  try {
    const workflows = app.get(WorkflowService);
    workers = await bootWorkers(ctx, 1, 10);
    for (const { kind, via, analyzed } of SUBMITTED_DRAINS) {
      await db.truncate();
      progress(
        `drain of ${count} 0-step tasks from ${via}(), ${analyzed ? 'analyzed' : 'statistics never gathered'}, concurrency 10, 1 process`,
      );
      const started = performance.now();
      const tasks =
        via === 'submit'
          ? (await submitConcurrently(workflows, count, sizes.submitCallers, { steps: 0 }), count)
          : await submitInBatches(workflows, count, sizes.submitBatchSize, { steps: 0 });
      const submitSeconds = (performance.now() - started) / 1000;
      await expectPending(ctx, tasks);
      if (analyzed) await db.client.query('ANALYZE agent_tasks');
      const stats = await db.statistics();
      const result = await timeDrain(ctx, workers, 0, tasks);
      raw[`drain.${kind}`] = { ...result, submitSeconds, statistics: stats };
      ctx.results.set(
        `drain.${kind}`,
        result.tasksPerSecond,
        `${tasks} tasks (submitted in ${submitSeconds.toFixed(1)} s) drained in ${result.seconds.toFixed(2)} s; at the start ${stats.note}; ${describeCpu(result)}`,
      );
    }
  } finally {
    await Promise.all(workers.map((worker) => worker.stop()));
    await app.close();
  }
}
