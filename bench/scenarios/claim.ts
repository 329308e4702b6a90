import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { BenchContext, rawSection } from '../context';
import { captureClaimStatements, Statement } from '../sql-capture';
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

/** Runs the claim in a transaction, timing only its statement(s), then rolls it back. */
async function timedClaim(client: Client, prefix: string, statements: Statement[], expected: number): Promise<number> {
  await client.query('BEGIN');
  try {
    const started = performance.now();
    let claimed = 0;
    for (const [index, statement] of statements.entries()) {
      const result = await client.query({ name: `${prefix}_${index}`, text: statement.text, values: statement.values });
      claimed = result.rowCount ?? result.rows.length;
    }
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
  usesClaimIndex: boolean;
}

function planReport(lines: Array<{ 'QUERY PLAN': string }>): PlanReport {
  const plan = lines.map((line) => line['QUERY PLAN']).join('\n');
  return { plan, hasSort: /\bSort\b/.test(plan), usesClaimIndex: plan.includes('idx_agent_tasks_claim') };
}

/** The plan with these parameter values (custom plan), and the generic plan a prepared statement may switch to. */
async function explainClaim(client: Client, statement: Statement): Promise<{ custom: PlanReport; generic: PlanReport }> {
  const custom = planReport((await client.query(`EXPLAIN ${statement.text}`, statement.values)).rows);
  await client.query('BEGIN');
  try {
    await client.query(`PREPARE bench_claim_generic AS ${statement.text}`);
    await client.query('SET LOCAL plan_cache_mode = force_generic_plan');
    const args = statement.values.map((value) => literal(client, value)).join(', ');
    const generic = planReport((await client.query(`EXPLAIN EXECUTE bench_claim_generic(${args})`)).rows);
    return { custom, generic };
  } finally {
    await client.query('ROLLBACK');
    // PREPARE is not transactional; only this statement goes (DEALLOCATE ALL would also drop
    // the protocol-level statements node-postgres believes it still has).
    await client.query('DEALLOCATE bench_claim_generic').catch(() => undefined);
  }
}

/**
 * The claim statement's own time (client round trip, prepared as the library prepares it) for
 * a batch of `claimBatch` at a small and a large queue depth, plus its plan at the large one.
 */
export async function claimScenario(ctx: BenchContext): Promise<void> {
  const { db, sizes } = ctx;
  const raw = rawSection(ctx, 'claim');
  const statements = await captureClaimStatements(sizes.claimBatch);
  raw.statements = statements.map(({ text, values, name }) => ({ text, values, name }));
  const claiming = statements.find((statement) => /SKIP LOCKED/i.test(statement.text)) ?? statements[0];

  const depths: Array<['small' | 'large', number]> = [
    ['small', sizes.claimDepths.small],
    ['large', sizes.claimDepths.large],
  ];
  for (const [which, depth] of depths) {
    progress(`claim latency at ${depth} pending: ${sizes.claimSamples} claims of ${sizes.claimBatch}, rolled back`);
    await db.truncate();
    await db.insertPending(NOOP_WORKFLOW, { steps: 0 }, depth);
    await db.client.query('ANALYZE agent_tasks');
    for (let i = 0; i < sizes.claimWarmup; i++) await timedClaim(db.client, `bench_claim_${which}`, statements, sizes.claimBatch);
    const samples: number[] = [];
    for (let i = 0; i < sizes.claimSamples; i++) samples.push(await timedClaim(db.client, `bench_claim_${which}`, statements, sizes.claimBatch));
    // Which plans the prepared claim really ran with: PostgreSQL may switch to a generic plan after 5 executions.
    const plans = await db.client.query<{ name: string; generic_plans: string; custom_plans: string }>(
      `SELECT name, generic_plans, custom_plans FROM pg_prepared_statements WHERE name LIKE $1`,
      [`bench_claim_${which}_%`],
    );
    raw[`${which}_${depth}`] = { depth, samplesMs: samples, plansUsed: plans.rows };

    let note = `${samples.length} claims, each rolled back; ${depth} pending`;
    if (which === 'large') {
      const { custom, generic } = await explainClaim(db.client, claiming);
      raw.plan = { depth, custom, generic };
      const flags = (report: PlanReport) =>
        `Sort node: ${report.hasSort ? 'YES' : 'no'}, idx_agent_tasks_claim: ${report.usesClaimIndex ? 'yes' : 'NO'}`;
      const used = plans.rows.map((row) => `${row.custom_plans} custom / ${row.generic_plans} generic executions`).join(', ');
      note += `; plan: ${flags(custom)}; generic plan: ${flags(generic)}; prepared claim ran ${used}`;
      ctx.appendix.push(
        `EXPLAIN of the claim statement (TaskStore.claimTasks, batch of ${sizes.claimBatch}) at ${depth} pending tasks:`,
        '',
        '```',
        custom.plan,
        '```',
        '',
        `Custom plan: ${flags(custom)}. Generic plan (what a prepared statement may switch to after 5 executions): ${flags(generic)}. ` +
          `The prepared claim ran with ${used} at this depth.`,
      );
      if (generic.plan !== custom.plan) ctx.appendix.push('', 'Generic plan:', '', '```', generic.plan, '```');
    }
    ctx.results.set(which === 'small' ? 'claim.small' : 'claim.large', median(samples), note);
    if (which === 'large') ctx.appendix.push('', ...(await statementTimes(ctx)));
  }
  await db.truncate();
}
