import { performance } from 'node:perf_hooks';
import { WorkflowService } from '@duraflow/nestjs';
import { startBenchApp } from '../app';
import { BenchContext, rawSection } from '../context';
import { BenchDatabase, createBenchDatabase } from '../database';
import { SUBMITTED_DRAINS } from '../rows';
import { median, progress } from '../stats';
import { BenchWorkerProcess } from '../worker-process';
import { RunProbe } from '../workflows';
import { claimAtDepth, planAppendix, planFlags } from './claim';
import { bootWorkers, describeCpu, timeDrain } from './drain';
import { expectPending, submitConcurrently, submitInBatches } from './submit';

/** What the statistics of agent_tasks say now: how often it was analyzed, and how many pending rows the planner expects. */
async function statistics(db: BenchDatabase): Promise<{ analyzed: number; plannerPending: number; note: string }> {
  const { rows } = await db.client.query<{ analyzed: number }>(
    `SELECT (analyze_count + autoanalyze_count)::int AS analyzed FROM pg_stat_user_tables WHERE relname = 'agent_tasks'`,
  );
  const estimate = await db.client.query(`EXPLAIN (FORMAT JSON) SELECT 1 FROM agent_tasks WHERE status = 'pending'`);
  const plannerPending = Math.round(estimate.rows[0]['QUERY PLAN'][0].Plan['Plan Rows']);
  const analyzed = rows[0]?.analyzed ?? 0;
  return { analyzed, plannerPending, note: `${analyzed ? 'analyzed' : 'never analyzed'}, the planner expects ${plannerPending} pending` };
}

/**
 * What users meet right after a deployment: a new database whose statistics were never
 * gathered. The claim at the two depths (bulk-inserted, no ANALYZE), then 0-step drains of
 * tasks submitted through the API (submit() from concurrent callers, submitMany() in batches)
 * with the statistics never gathered, and the same analyzed just before the drain. Autovacuum
 * is off for the table, so nothing analyzes it during the run whatever the server's setting.
 */
export async function staleStatisticsScenario(ctx: BenchContext): Promise<void> {
  const db = await createBenchDatabase();
  const onNew: BenchContext = { ...ctx, db };
  const raw = rawSection(ctx, 'staleStatistics');
  try {
    await db.client.query('ALTER TABLE agent_tasks SET (autovacuum_enabled = false)');
    const { small, large } = ctx.sizes.claimDepths;
    for (const [id, depth] of [
      ['claim.stale.small', small],
      ['claim.stale.large', large],
    ] as const) {
      const explain = depth === large;
      const result = await claimAtDepth(onNew, db, { label: `stale_${depth}`, depth, analyze: false, explain });
      const stats = await statistics(db);
      raw[id] = { depth, samplesMs: result.samples, plansUsed: result.plansUsed, plan: result.plan, statistics: stats };
      const plan = result.plan ? `; plan: ${planFlags(result.plan.analyzed)}` : '';
      ctx.results.set(id, median(result.samples), `${result.samples.length} claims, each rolled back; ${depth} pending, ${stats.note}${plan}`);
      if (explain) {
        ctx.appendix.push(
          '',
          ...planAppendix(`EXPLAIN ANALYZE of the claim statement at ${depth} pending tasks in a new database, statistics never gathered (${stats.note}):`, result),
        );
      }
    }
    await submittedDrains(onNew, raw);
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
      progress(`drain of ${count} 0-step tasks from ${via}(), ${analyzed ? 'analyzed' : 'statistics never gathered'}, concurrency 10, 1 process`);
      const started = performance.now();
      const tasks =
        via === 'submit'
          ? (await submitConcurrently(workflows, count, sizes.submitCallers, { steps: 0 }), count)
          : await submitInBatches(workflows, count, sizes.submitBatchSize, { steps: 0 });
      const submitSeconds = (performance.now() - started) / 1000;
      await expectPending(ctx, tasks);
      if (analyzed) await db.client.query('ANALYZE agent_tasks');
      const stats = await statistics(db);
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
