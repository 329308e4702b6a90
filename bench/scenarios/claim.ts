import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { BenchContext, rawSection } from '../context';
import { BenchDatabase } from '../database';
import { captureClaimStatements, sendAsLibrary, splitStatements, Statement } from '../sql-capture';
import { median, progress } from '../stats';
import { NOOP_WORKFLOW } from '../workflows';
import { statementTimes } from './statement-times';

function literal(client: Client, value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (Array.isArray(value)) return `ARRAY[${value.map((item) => literal(client, item)).join(', ')}]`;
  if (value instanceof Date) return client.escapeLiteral(value.toISOString());
  return client.escapeLiteral(typeof value === 'string' ? value : JSON.stringify(value));
}

/** Runs the claim in a transaction as the library sends it, timing only its statement(s), then rolls it back. */
async function timedClaim(client: Client, prefix: string, statements: Statement[], expected: number): Promise<number> {
  await client.query('BEGIN');
  try {
    const started = performance.now();
    let claimed = 0;
    for (const statement of statements) claimed = (await sendAsLibrary(client, statement, prefix)).rowCount;
    const elapsed = performance.now() - started;
    if (claimed !== expected) throw new Error(`the claim returned ${claimed} rows, expected ${expected}`);
    return elapsed;
  } finally {
    await client.query('ROLLBACK');
  }
}

export interface PlanReport {
  plan: string;
  hasSort: boolean;
  hasBitmap: boolean;
  usesClaimIndex: boolean;
}

function planReport(lines: Array<{ 'QUERY PLAN': string }>): PlanReport {
  const plan = lines.map((line) => line['QUERY PLAN']).join('\n');
  return { plan, hasSort: /\bSort\b/.test(plan), hasBitmap: /\bBitmap\b/.test(plan), usesClaimIndex: plan.includes('idx_agent_tasks_claim') };
}

export function planFlags(report: PlanReport): string {
  return `Sort node: ${report.hasSort ? 'YES' : 'no'}, bitmap scan: ${report.hasBitmap ? 'YES' : 'no'}, idx_agent_tasks_claim: ${report.usesClaimIndex ? 'yes' : 'NO'}`;
}

/**
 * EXPLAIN ANALYZE of the claim (rolled back), after the statements the library sends before it
 * in the same transaction (its planner settings). For a claim sent as a prepared statement,
 * also the generic plan PostgreSQL may switch to after 5 executions.
 */
async function explainClaim(client: Client, statement: Statement): Promise<{ analyzed: PlanReport; generic?: PlanReport }> {
  const { setup, last } = splitStatements(statement);
  await client.query('BEGIN');
  try {
    for (const text of setup) await client.query(text);
    await client.query('SAVEPOINT bench_explain');
    const analyzed = planReport((await client.query(`EXPLAIN (ANALYZE) ${last.text}`, last.values)).rows);
    await client.query('ROLLBACK TO SAVEPOINT bench_explain');
    if (!statement.name) return { analyzed };
    await client.query(`PREPARE bench_claim_generic AS ${last.text}`);
    await client.query('SET LOCAL plan_cache_mode = force_generic_plan');
    const args = last.values.map((value) => literal(client, value)).join(', ');
    const generic = planReport((await client.query(`EXPLAIN EXECUTE bench_claim_generic(${args})`)).rows);
    return { analyzed, generic };
  } finally {
    await client.query('ROLLBACK');
    // PREPARE is not transactional; only this statement goes (DEALLOCATE ALL would also drop
    // the protocol-level statements node-postgres believes it still has).
    if (statement.name) await client.query('DEALLOCATE bench_claim_generic').catch(() => undefined);
  }
}

export interface ClaimAtDepth {
  samples: number[];
  /** How the claim is planned when it runs: per prepared statement, PostgreSQL's count of custom and generic plans. */
  plansUsed: string;
  plan?: { analyzed: PlanReport; generic?: PlanReport };
}

/**
 * The claim's own time at `depth` pending tasks in `db` (bulk-inserted; analyzed or not), as
 * the library sends it, `claimSamples` claims of `claimBatch` after a warm-up, each rolled back.
 */
export async function claimAtDepth(
  ctx: BenchContext,
  db: BenchDatabase,
  opts: { label: string; depth: number; analyze: boolean; explain: boolean },
): Promise<ClaimAtDepth> {
  const { sizes } = ctx;
  const statements = await captureClaimStatements(sizes.claimBatch);
  const prefix = `bench_claim_${opts.label}`;
  progress(`claim latency at ${opts.depth} pending (${opts.analyze ? 'analyzed' : 'statistics never gathered'}): ${sizes.claimSamples} claims of ${sizes.claimBatch}, rolled back`);
  await db.truncate();
  await db.insertPending(NOOP_WORKFLOW, { steps: 0 }, opts.depth);
  if (opts.analyze) await db.client.query('ANALYZE agent_tasks');
  for (let i = 0; i < sizes.claimWarmup; i++) await timedClaim(db.client, prefix, statements, sizes.claimBatch);
  const samples: number[] = [];
  for (let i = 0; i < sizes.claimSamples; i++) samples.push(await timedClaim(db.client, prefix, statements, sizes.claimBatch));
  let plansUsed = 'planned on every call (not a prepared statement)';
  if (statements.some((statement) => statement.name)) {
    const plans = await db.client.query<{ custom_plans: string; generic_plans: string }>(
      `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name LIKE $1`,
      [`${prefix}_%`],
    );
    plansUsed = `prepared: ${plans.rows.map((row) => `${row.custom_plans} custom / ${row.generic_plans} generic executions`).join(', ')}`;
  }
  const claiming = statements.find((statement) => /SKIP LOCKED/i.test(statement.text)) ?? statements[0];
  return { samples, plansUsed, plan: opts.explain ? await explainClaim(db.client, claiming) : undefined };
}

/** The plan of a claim at a depth, for the text after the table. */
export function planAppendix(heading: string, result: ClaimAtDepth): string[] {
  if (!result.plan) return [];
  const { analyzed, generic } = result.plan;
  const lines = [heading, '', '```', analyzed.plan, '```', '', `${planFlags(analyzed)}; ${result.plansUsed}.`];
  if (generic) lines.push('', `Generic plan (what the prepared statement may switch to after 5 executions): ${planFlags(generic)}`, '', '```', generic.plan, '```');
  return lines;
}

/**
 * The claim statement's own time (client round trip, sent as the library sends it) for a batch
 * of `claimBatch` at a small and a large queue depth with fresh statistics, plus its plan at the
 * large one. (The same with statistics never gathered: the stale-statistics scenario.)
 */
export async function claimScenario(ctx: BenchContext): Promise<void> {
  const { db, sizes } = ctx;
  const raw = rawSection(ctx, 'claim');
  raw.statements = (await captureClaimStatements(sizes.claimBatch)).map(({ text, values, name }) => ({ text, values, name }));

  const small = await claimAtDepth(ctx, db, { label: 'small', depth: sizes.claimDepths.small, analyze: true, explain: false });
  raw.small = { depth: sizes.claimDepths.small, samplesMs: small.samples, plansUsed: small.plansUsed };
  ctx.results.set('claim.small', median(small.samples), `${small.samples.length} claims, each rolled back; ${sizes.claimDepths.small} pending, analyzed; ${small.plansUsed}`);

  const large = await claimAtDepth(ctx, db, { label: 'large', depth: sizes.claimDepths.large, analyze: true, explain: true });
  raw.large = { depth: sizes.claimDepths.large, samplesMs: large.samples, plansUsed: large.plansUsed, plan: large.plan };
  ctx.results.set(
    'claim.large',
    median(large.samples),
    `${large.samples.length} claims, each rolled back; ${sizes.claimDepths.large} pending, analyzed; plan: ${planFlags(large.plan!.analyzed)}; ${large.plansUsed}`,
  );
  ctx.appendix.push(
    ...planAppendix(`EXPLAIN of the claim statement (TaskStore.claimTasks, batch of ${sizes.claimBatch}) at ${sizes.claimDepths.large} pending tasks, analyzed (EXPLAIN ANALYZE, rolled back):`, large),
    '',
    ...(await statementTimes(ctx)),
  );
  await db.truncate();
}
