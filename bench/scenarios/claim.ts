import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { BenchContext, rawSection } from '../context';
import { BenchDatabase, createBenchDatabase } from '../database';
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
export async function timedClaim(client: Client, prefix: string, statements: Statement[], expected: number): Promise<number> {
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

interface PlanReport {
  plan: string;
  hasSort: boolean;
  hasBitmap: boolean;
  usesClaimIndex: boolean;
}

function planReport(lines: Array<{ 'QUERY PLAN': string }>): PlanReport {
  const plan = lines.map((line) => line['QUERY PLAN']).join('\n');
  return {
    plan,
    hasSort: /\bSort\b/.test(plan),
    hasBitmap: /\bBitmap\b/.test(plan),
    usesClaimIndex: plan.includes('idx_agent_tasks_claim'),
  };
}

function planFlags(report: PlanReport): string {
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

/** One queue the claim is timed on: its own database, so the four can be timed side by side. */
interface ClaimQueue {
  row: 'claim.small' | 'claim.large' | 'claim.stale.small' | 'claim.stale.large';
  db: BenchDatabase;
  depth: number;
  analyzed: boolean;
}

/**
 * The claim's own time (client round trip, sent as the library sends it) for a batch of
 * `claimBatch` at a small and a large queue depth, each with fresh statistics and with
 * statistics never gathered (a new database, autovacuum off for the table, no ANALYZE), plus
 * the plans at the large depth. The four queues sit in four databases and are claimed from in
 * turn (warm-up and samples alike), so each figure is taken over the same minutes and on a
 * connection as warm as the others': a comparison between them is not a drift of the machine.
 */
export async function claimScenario(ctx: BenchContext): Promise<void> {
  const { sizes } = ctx;
  const raw = rawSection(ctx, 'claim');
  const statements = await captureClaimStatements(sizes.claimBatch);
  raw.statements = statements.map(({ text, values, name }) => ({ text, values, name }));
  const { small, large } = sizes.claimDepths;
  const extra: BenchDatabase[] = [];
  try {
    for (let i = 0; i < 3; i++) extra.push(await createBenchDatabase());
    const queues: ClaimQueue[] = [
      { row: 'claim.small', db: ctx.db, depth: small, analyzed: true },
      { row: 'claim.large', db: extra[0], depth: large, analyzed: true },
      { row: 'claim.stale.small', db: extra[1], depth: small, analyzed: false },
      { row: 'claim.stale.large', db: extra[2], depth: large, analyzed: false },
    ];
    for (const queue of queues) {
      await queue.db.truncate();
      if (!queue.analyzed) await queue.db.client.query('ALTER TABLE agent_tasks SET (autovacuum_enabled = false)');
      await queue.db.insertPending(NOOP_WORKFLOW, { steps: 0 }, queue.depth);
      if (queue.analyzed) await queue.db.client.query('ANALYZE agent_tasks');
    }
    progress(
      `claim latency at ${small} and ${large} pending, analyzed and statistics never gathered: ${sizes.claimSamples} claims of ${sizes.claimBatch} each, in turn, rolled back`,
    );
    const samples = new Map(queues.map((queue) => [queue.row, [] as number[]]));
    for (let i = 0; i < sizes.claimWarmup + sizes.claimSamples; i++) {
      for (const queue of queues) {
        const ms = await timedClaim(queue.db.client, `bench_${queue.row.replace(/\./g, '_')}`, statements, sizes.claimBatch);
        if (i >= sizes.claimWarmup) samples.get(queue.row)!.push(ms);
      }
    }
    const claiming = statements.find((statement) => /SKIP LOCKED/i.test(statement.text)) ?? statements[0];
    for (const queue of queues) {
      const stats = await queue.db.statistics();
      const plansUsed = await plansUsedBy(queue.db.client, `bench_${queue.row.replace(/\./g, '_')}`, statements);
      const plan = queue.depth === large ? await explainClaim(queue.db.client, claiming) : undefined;
      const taken = samples.get(queue.row)!;
      raw[queue.row] = { depth: queue.depth, samplesMs: taken, statistics: stats, plansUsed, plan };
      const planNote = plan ? `; plan: ${planFlags(plan.analyzed)}` : '';
      ctx.results.set(
        queue.row,
        median(taken),
        `${taken.length} claims, each rolled back; ${queue.depth} pending, ${stats.note}${planNote}; ${plansUsed}`,
      );
      if (plan) {
        ctx.appendix.push(
          ...planAppendix(
            `EXPLAIN of the claim statement (TaskTransitions.claim, batch of ${sizes.claimBatch}) at ${queue.depth} pending tasks, ${stats.note} (EXPLAIN ANALYZE, rolled back):`,
            plan,
            plansUsed,
          ),
          '',
        );
      }
    }
    ctx.appendix.push(...(await statementTimes({ ...ctx, db: extra[0] })));
  } finally {
    for (const db of extra) await db.drop();
    await ctx.db.truncate();
  }
}

/** How the claim was planned when it ran: per prepared statement, PostgreSQL's count of custom and generic plans. */
async function plansUsedBy(client: Client, prefix: string, statements: Statement[]): Promise<string> {
  if (!statements.some((statement) => statement.name)) return 'planned on every call (not a prepared statement)';
  const plans = await client.query<{ custom_plans: string; generic_plans: string }>(
    `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name LIKE $1`,
    [`${prefix}_%`],
  );
  return `prepared: ${plans.rows.map((row) => `${row.custom_plans} custom / ${row.generic_plans} generic executions`).join(', ')}`;
}

/** The plan of the claim at one depth, for the text after the table. */
function planAppendix(heading: string, plan: { analyzed: PlanReport; generic?: PlanReport }, plansUsed: string): string[] {
  const { analyzed, generic } = plan;
  const lines = [heading, '', '```', analyzed.plan, '```', '', `${planFlags(analyzed)}; ${plansUsed}.`];
  if (generic)
    lines.push(
      '',
      `Generic plan (what the prepared statement may switch to after 5 executions): ${planFlags(generic)}`,
      '',
      '```',
      generic.plan,
      '```',
    );
  return lines;
}
