import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { countLiteral } from '../../libs/duraflow/src/persistence/literals';
import { claimPreparedLimitedTasks, preparedLimitedClaim } from '../../libs/duraflow/src/persistence/lifecycle/claim-limited-tasks';
import { CLAIM_SETTINGS } from '../../libs/duraflow/src/persistence/lifecycle/claim-tasks';
import { FlowLimits } from '../../libs/duraflow/src/validation/flow-limits';
import { BenchContext, rawSection } from '../context';
import { BenchDatabase, createBenchDatabase } from '../database';
import { FlowBenchWorkflow } from '../protocol';
import { median, progress } from '../stats';
import { BenchWorkerProcess } from '../worker-process';
import { CAPPED_100_WORKFLOW, CAPPED_WORKFLOW, KEYED_WORKFLOW, NOOP_WORKFLOW } from '../workflows';
import { bootWorkers, describeCpu, DrainResult, timeDrain } from './drain';

/** The limits of bench/workflows.ts's flow workflows, as the library resolves them (for the claim's SQL). */
const CAPPED: FlowLimits = { workflowName: CAPPED_WORKFLOW, concurrency: 10, concurrencyKey: null, keyConcurrency: null, rateLimit: null };
const KEYED: FlowLimits = {
  workflowName: KEYED_WORKFLOW,
  concurrency: null,
  concurrencyKey: (input) => (input as { key: string }).key,
  keyConcurrency: 1,
  rateLimit: null,
};

/**
 * `count` pending 0-step tasks of `workflow` in one statement, with the concurrency key submit
 * would store (`''` for the capped workflow, `k0`..`k{keys-1}` round-robin for the keyed one,
 * null without limits), then ANALYZE.
 */
async function insertFlowTasks(db: BenchDatabase, workflow: string, count: number, keys: number): Promise<void> {
  const key = workflow === KEYED_WORKFLOW ? `'k' || (g % ${keys})` : workflow === NOOP_WORKFLOW ? 'NULL' : `''`;
  const input = workflow === KEYED_WORKFLOW ? `jsonb_build_object('steps', 0, 'key', 'k' || (g % ${keys}))` : `'{"steps":0}'::jsonb`;
  await db.client.query(
    `INSERT INTO agent_tasks (workflow_name, input, concurrency_key, created_at, updated_at)
     SELECT $1, ${input}, ${key}, now() + g * interval '1 microsecond', now() FROM generate_series(1, $2::int) AS g`,
    [workflow, count],
  );
  await db.client.query('ANALYZE agent_tasks');
}

async function drainWith(ctx: BenchContext, workflow: string, tasks: number): Promise<DrainResult> {
  const flowWorkflow = workflow === NOOP_WORKFLOW ? undefined : (workflow as FlowBenchWorkflow);
  let workers: BenchWorkerProcess[] = [];
  try {
    workers = await bootWorkers(ctx, 1, 10, false, flowWorkflow);
    await ctx.db.truncate();
    await ctx.db.client.query('TRUNCATE flow_limits, flow_starts');
    await insertFlowTasks(ctx.db, workflow, tasks, ctx.sizes.flowKeys);
    return await timeDrain(ctx, workers, 0, tasks);
  } finally {
    await Promise.all(workers.map((worker) => worker.stop()));
  }
}

/** The statement names each bench client has prepared. */
const preparedOn = new WeakMap<Client, Set<string>>();

/** One timed limited claim of `batch` (client round trip, as the library sends it: prepared once per connection), rolled back. */
async function timedLimitedClaim(client: Client, flow: FlowLimits, batch: number): Promise<number> {
  let prepared = preparedOn.get(client);
  if (!prepared) preparedOn.set(client, (prepared = new Set()));
  const statement = preparedLimitedClaim(flow, [1]);
  await client.query('BEGIN');
  try {
    const started = performance.now();
    const claimed = (await claimPreparedLimitedTasks(client, prepared, CLAIM_SETTINGS, statement, 'bench-claim', batch)).length;
    const elapsed = performance.now() - started;
    if (claimed !== batch) throw new Error(`the limited claim of ${flow.workflowName} returned ${claimed} rows, expected ${batch}`);
    return elapsed;
  } finally {
    await client.query('ROLLBACK');
  }
}

/** EXPLAIN ANALYZE of the limited claim as the library runs it (prepared, the connection's generic plan), after its settings and lock, rolled back. */
async function explainLimitedClaim(client: Client, flow: FlowLimits, batch: number): Promise<string> {
  const statement = preparedLimitedClaim(flow, [1]);
  if (!preparedOn.get(client)?.has(statement.name)) throw new Error(`${statement.name} is not prepared on this client yet`);
  await client.query('BEGIN');
  try {
    await client.query(`${CLAIM_SETTINGS}, set_config('plan_cache_mode', 'force_generic_plan', true)`);
    await client.query(statement.lock);
    const { rows } = await client.query(`EXPLAIN (ANALYZE, COSTS OFF) EXECUTE ${statement.name}('bench-claim', ${countLiteral(batch)})`);
    return rows.map((row) => row['QUERY PLAN']).join('\n');
  } finally {
    await client.query('ROLLBACK');
  }
}

/**
 * Flow control (issue 17): the drain of 0-step tasks by one worker process at concurrency 10,
 * without limits, with a workflow limit of 10 (it binds: a task counts until its completion
 * commits, so at most 10 are claimed, run or being recorded at once), of 100 (it never binds: the
 * limited claim's own cost), and over 1,000 keys at keyConcurrency 1, back to back; then the limited claim's own time (prepared, as the library sends it) at 1k and 100k pending (each depth in a database of its
 * own, claimed from in turn), and its plan at 100k.
 */
export async function flowControlScenario(ctx: BenchContext): Promise<void> {
  const raw = rawSection(ctx, 'flow-control');
  const tasks = ctx.sizes.flowDrainTasks;
  const drains: Array<[string, string]> = [
    ['flow.drain.unlimited', NOOP_WORKFLOW],
    ['flow.drain.capped', CAPPED_WORKFLOW],
    ['flow.drain.capped100', CAPPED_100_WORKFLOW],
    ['flow.drain.keyed', KEYED_WORKFLOW],
  ];
  // Drains of 8,000 tasks take 1-2 s each: one round is at the mercy of the machine's other
  // load. Each round runs the four back to back; its ratios compare drains of the same minutes.
  const rates: Record<string, number[]> = {};
  const ratios: Record<string, number[]> = {};
  const results: Record<string, DrainResult[]> = {};
  for (let round = 0; round < ctx.sizes.flowDrainRounds; round++) {
    for (const [row, workflow] of drains) {
      progress(`flow control: drain ${tasks} tasks of ${workflow} (round ${round + 1} of ${ctx.sizes.flowDrainRounds})`);
      const result = await drainWith(ctx, workflow, tasks);
      (rates[row] ??= []).push(result.tasksPerSecond);
      (results[row] ??= []).push(result);
    }
    for (const [row] of drains.slice(1)) (ratios[row] ??= []).push(rates[row][round] / rates['flow.drain.unlimited'][round]);
  }
  for (const [row] of drains) {
    raw[row] = results[row];
    const result = results[row][results[row].length - 1];
    const statements = Object.entries(result.statements)
      .sort(([, a], [, b]) => b - a)
      .map(([name, n]) => `${name} ${(n / tasks).toFixed(2)}`)
      .join(', ');
    const rounds = rates[row].map((rate) => rate.toFixed(0)).join(', ');
    ctx.results.set(
      row,
      median(rates[row]),
      `median of ${rates[row].length} rounds (${rounds}/s) of ${tasks} tasks; last round: ${describeCpu(result)}; per task: ${statements}`,
    );
  }
  for (const [row] of drains.slice(1)) {
    ctx.results.set(
      `${row}.ratio`,
      median(ratios[row]),
      `target ≥ 0.8; rounds: ${ratios[row].map((ratio) => ratio.toFixed(2)).join(', ')}`,
    );
  }
  await ctx.db.truncate();

  const { small, large } = ctx.sizes.claimDepths;
  const queues: Array<{ depth: number; db: BenchDatabase; rows: Record<'capped' | 'keyed', string> }> = [];
  try {
    for (const [depth, rows] of [
      [small, { capped: 'flow.claim.capped.small', keyed: 'flow.claim.keyed.small' }],
      [large, { capped: 'flow.claim.capped.large', keyed: 'flow.claim.keyed.large' }],
    ] as const) {
      const db = await createBenchDatabase();
      queues.push({ depth, db, rows });
      // Half of each workflow: the keyed half over 1,000 keys (100 tasks a key at 100k pending).
      await insertFlowTasks(db, CAPPED_WORKFLOW, depth / 2, 1_000);
      await insertFlowTasks(db, KEYED_WORKFLOW, depth / 2, 1_000);
    }
    const samples: Record<string, number[]> = {};
    const batch = ctx.sizes.claimBatch;
    for (let i = 0; i < ctx.sizes.claimWarmup + ctx.sizes.claimSamples; i++) {
      for (const queue of queues) {
        for (const [kind, flow] of [
          ['capped', CAPPED],
          ['keyed', KEYED],
        ] as const) {
          const ms = await timedLimitedClaim(queue.db.client, flow, batch);
          if (i >= ctx.sizes.claimWarmup) (samples[queue.rows[kind]] ??= []).push(ms);
        }
      }
    }
    for (const queue of queues) {
      for (const kind of ['capped', 'keyed'] as const) {
        const row = queue.rows[kind];
        ctx.results.set(row, median(samples[row]), `${queue.depth} pending (half capped, half keyed over 1,000 keys), analyzed`);
        raw[row] = samples[row];
      }
    }
    const largest = queues[queues.length - 1];
    ctx.appendix.push(
      '',
      `Plan of the limited claim at ${largest.depth} pending, workflow limit (${CAPPED_WORKFLOW}, concurrency 10), EXPLAIN ANALYZE of a claim of ${batch} (prepared, generic plan), rolled back:`,
      '',
      '```',
      await explainLimitedClaim(largest.db.client, CAPPED, batch),
      '```',
      '',
      `Plan of the limited claim at ${largest.depth} pending, 1,000 keys (${KEYED_WORKFLOW}, keyConcurrency 1), EXPLAIN ANALYZE of a claim of ${batch} (prepared, generic plan), rolled back:`,
      '',
      '```',
      await explainLimitedClaim(largest.db.client, KEYED, batch),
      '```',
    );
  } finally {
    for (const queue of queues) await queue.db.drop();
  }
}
