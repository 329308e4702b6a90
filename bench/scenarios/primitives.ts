import { WorkflowService } from '@duraflow/nestjs';
import { BenchContext, rawSection } from '../context';
import { BenchDatabase, createBenchDatabase } from '../database';
import { countDelta, installQueryCounter, queryCounts } from '../query-counter';
import { captureClaimStatements } from '../sql-capture';
import { median, progress, quantile } from '../stats';
import { NOOP_WORKFLOW, PARENT_WORKFLOW, SIGNAL_WORKFLOW, SLEEP_WORKFLOW, wallNow } from '../workflows';
import { timedClaim } from './claim';

/**
 * The durable primitives (issue 15), on the bench app's in-process worker (production defaults:
 * poll every 500 ms, so a figure under it is the worker's own timer or a NOTIFY, not the poll):
 * - sleep lateness: `sleeps` tasks sleeping 2 s + 10 ms × i at once; each returns the wall
 *   time it resumed, minus its `wake_at` (set on the same clock): p50 and p95;
 * - signal → resumed: one task at a time, the signal sent as soon as its wait row is `waiting`,
 *   to the wall time the run resumed; beside it submit → start of the same tasks;
 * - runChild overhead: submit → completed of a parent that runs 10 children (0-step) against a
 *   10-step workflow, alternated, p50 of each, the difference / 10;
 * - claim with sleeping tasks: TaskTransitions.claim' statement (rolled back) over 1k runnable
 *   tasks, alone and created after `sleepingForClaim` tasks sleeping until tomorrow;
 * - idle worker: the statements this process sends in `idleSeconds` with `sleepingIdle` tasks
 *   sleeping and nothing to run.
 */
export async function primitivesScenario(ctx: BenchContext, workflows: WorkflowService): Promise<void> {
  const sizes = ctx.sizes.primitives;
  const raw = rawSection(ctx, 'primitives');
  const db = ctx.db.client;

  // The first runs of every sleeper (all submitted at once) are over well before the first
  // wake-up, so the lateness is the wake-up's, not the queue's.
  progress(`durable sleep: ${sizes.sleeps} tasks sleeping 2 s + 10 ms × i`);
  const sleepers = await Promise.all(
    Array.from({ length: sizes.sleeps }, (_, i) => workflows.submit(SLEEP_WORKFLOW, { ms: 2_000 + 10 * i })),
  );
  const lateness: number[] = [];
  for (const task of sleepers) {
    const done = await workflows.waitFor(task.id, { timeoutMs: 60_000 });
    const { rows } = await db.query(`SELECT wake_at FROM step_runs WHERE task_id = $1 AND step_key = 'nap'`, [task.id]);
    lateness.push((done.output as { resumedAt: number }).resumedAt - new Date(rows[0].wake_at).getTime());
  }
  raw.sleepLatenessMs = lateness;
  ctx.results.set('prims.sleep.p50', quantile(lateness, 0.5), `${lateness.length} sleeps; max ${Math.max(...lateness).toFixed(1)} ms`);
  ctx.results.set('prims.sleep.p95', quantile(lateness, 0.95), `${lateness.length} sleeps`);

  progress(`signal -> resumed: ${sizes.signals} tasks, one at a time`);
  const signalled: number[] = [];
  const started: number[] = [];
  for (let i = 0; i < sizes.signals; i++) {
    const submittedAt = wallNow();
    const task = await workflows.submit(SIGNAL_WORKFLOW, {});
    for (;;) {
      const { rowCount } = await db.query(
        `SELECT 1 FROM step_runs WHERE task_id = $1 AND step_key = 'signal:go#1' AND status = 'waiting'`,
        [task.id],
      );
      if (rowCount) break;
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    const sentAt = wallNow();
    await workflows.signal(task.id, 'go', { i });
    const done = await workflows.waitFor(task.id, { timeoutMs: 30_000 });
    const output = done.output as { startedAt: number; resumedAt: number };
    signalled.push(output.resumedAt - sentAt);
    started.push(output.startedAt - submittedAt);
  }
  raw.signalToResumedMs = signalled;
  raw.submitToStartMs = started;
  ctx.results.set('prims.signal.p50', median(signalled), `${signalled.length} signals; p95 ${quantile(signalled, 0.95).toFixed(2)} ms`);
  ctx.results.set('prims.submit.p50', median(started), `the same ${started.length} tasks; the target: signal row ≤ this + 1 ms`);

  progress(`runChild overhead: ${sizes.childRuns} parents of 10 children and ${sizes.childRuns} 10-step runs, alternated`);
  const parents: number[] = [];
  const tenSteps: number[] = [];
  const timed = async (name: string, input: object) => {
    const at = wallNow();
    const task = await workflows.submit(name, input);
    const done = await workflows.waitFor(task.id, { timeoutMs: 60_000 });
    if (done.status !== 'completed') throw new Error(`${name} ${task.id} ended ${done.status}`);
    return wallNow() - at;
  };
  for (let i = 0; i < sizes.childRuns; i++) {
    parents.push(await timed(PARENT_WORKFLOW, { children: 10 }));
    tenSteps.push(await timed(NOOP_WORKFLOW, { steps: 10 }));
  }
  raw.parentOf10Ms = parents;
  raw.tenStepsMs = tenSteps;
  ctx.results.set(
    'prims.child.overhead',
    (median(parents) - median(tenSteps)) / 10,
    `submit → completed p50: parent of 10 runChild ${median(parents).toFixed(1)} ms, 10-step ${median(tenSteps).toFixed(1)} ms`,
  );

  await claimBehindSleepers(ctx);
  await idleWithSleepers(ctx);
}

async function insertSleeping(db: BenchDatabase, count: number): Promise<void> {
  await db.client.query(
    `INSERT INTO agent_tasks (workflow_name, input, scheduled_at, started_at, created_at, updated_at)
     SELECT $1, '{"ms": 86400000}'::jsonb, now() + interval '1 day', now(), now() - interval '1 hour' + g * interval '1 microsecond', now()
     FROM generate_series(1, $2::int) AS g`,
    [SLEEP_WORKFLOW, count],
  );
}

/** The claim's statement over 1k runnable tasks, with and without sleeping tasks ahead of them in the claim's order. */
async function claimBehindSleepers(ctx: BenchContext): Promise<void> {
  const sizes = ctx.sizes.primitives;
  progress(`claim with ${sizes.sleepingForClaim} sleeping tasks ahead of 1k runnable ones`);
  const statements = await captureClaimStatements(ctx.sizes.claimBatch);
  const awake = await createBenchDatabase();
  const sleeping = await createBenchDatabase();
  try {
    await insertSleeping(sleeping, sizes.sleepingForClaim);
    for (const db of [awake, sleeping]) {
      await db.insertPending(NOOP_WORKFLOW, { steps: 0 }, 1_000);
      await db.client.query('ANALYZE agent_tasks');
    }
    const samples = { awake: [] as number[], sleeping: [] as number[] };
    for (let i = 0; i < ctx.sizes.claimWarmup + ctx.sizes.claimSamples; i++) {
      const a = await timedClaim(awake.client, 'bench_prims_awake', statements, ctx.sizes.claimBatch);
      const s = await timedClaim(sleeping.client, 'bench_prims_sleeping', statements, ctx.sizes.claimBatch);
      if (i >= ctx.sizes.claimWarmup) {
        samples.awake.push(a);
        samples.sleeping.push(s);
      }
    }
    rawSection(ctx, 'primitives').claim = samples;
    ctx.results.set('prims.claim.awake', median(samples.awake), `${samples.awake.length} claims, rolled back, analyzed`);
    ctx.results.set(
      'prims.claim.sleeping',
      median(samples.sleeping),
      `${samples.sleeping.length} claims, rolled back, analyzed; ${sizes.sleepingForClaim} tasks sleeping until tomorrow created before the runnable ones`,
    );
  } finally {
    await awake.drop();
    await sleeping.drop();
  }
}

/** What an idle worker costs the database while many tasks sleep: its statements per second. */
async function idleWithSleepers(ctx: BenchContext): Promise<void> {
  const sizes = ctx.sizes.primitives;
  progress(`idle worker with ${sizes.sleepingIdle} sleeping tasks: statements over ${sizes.idleSeconds} s`);
  installQueryCounter();
  await insertSleeping(ctx.db, sizes.sleepingIdle);
  await ctx.db.client.query('ANALYZE agent_tasks');
  const before = queryCounts();
  await new Promise((resolve) => setTimeout(resolve, sizes.idleSeconds * 1_000));
  const delta = countDelta(before, queryCounts());
  const total = Object.values(delta).reduce((sum, n) => sum + n, 0);
  rawSection(ctx, 'primitives').idleStatements = delta;
  ctx.results.set(
    'prims.idle.qps',
    total / sizes.idleSeconds,
    `${sizes.sleepingIdle} sleeping tasks, poll every 500 ms: ${
      Object.entries(delta)
        .map(([key, n]) => `${key} ×${n}`)
        .join(', ') || 'none'
    } in ${sizes.idleSeconds} s`,
  );
}
