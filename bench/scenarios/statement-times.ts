import { Client } from 'pg';
import { BenchContext, rawSection } from '../context';
import { median } from '../stats';
import { captureClaimStatements, captureStoreCall, splitStatements, Statement, StoreKind } from '../sql-capture';

const REPETITIONS = 5;

const PREPARED_RUNS = 10;

interface StatementTime {
  statement: string;
  planningMs: number;
  executionMs: number;
  /** Of PREPARED_RUNS executions as a named prepared statement (as the library runs it): planned each time, or the cached generic plan. */
  customPlans?: number;
  genericPlans?: number;
}

/**
 * Runs the statement as a named prepared statement, as the library does, each time in a
 * savepoint rolled back at once, and asks PostgreSQL which plans it used: after 5 executions it
 * keeps a generic plan only when that is not costlier than the custom ones, else it plans anew every time.
 */
async function preparedPlans(client: Client, name: string, statement: Statement): Promise<{ customPlans: number; genericPlans: number }> {
  for (let i = 0; i < PREPARED_RUNS; i++) {
    await client.query('SAVEPOINT bench_prepared');
    try {
      await client.query({ name, text: statement.text, values: statement.values });
    } finally {
      await client.query('ROLLBACK TO SAVEPOINT bench_prepared');
    }
  }
  const { rows } = await client.query<{ custom_plans: string; generic_plans: string }>(
    'SELECT custom_plans, generic_plans FROM pg_prepared_statements WHERE name = $1',
    [name],
  );
  return { customPlans: Number(rows[0]?.custom_plans ?? 0), genericPlans: Number(rows[0]?.generic_plans ?? 0) };
}

/**
 * Server-side planning and execution time of the hot statements of one task, from
 * EXPLAIN (ANALYZE): each run in a savepoint rolled back at once (after the statements the
 * library sends before it, e.g. the claim's planner settings), inside a transaction that holds
 * one running task, so nothing changes. No commit is included (so no WAL flush).
 */
export async function statementTimes(ctx: BenchContext): Promise<string[]> {
  const { client } = ctx.db;
  const [claim] = await captureClaimStatements(1);
  await client.query('BEGIN');
  try {
    const running = await client.query<{ id: string; claim_token: string }>(
      `INSERT INTO agent_tasks (workflow_name, status, claim_token, worker_id, started_at, heartbeat_at)
       VALUES ('bench-probe', 'running', gen_random_uuid(), 'bench', now(), now()) RETURNING id, claim_token`,
    );
    const { id, claim_token: claimToken } = running.rows[0];
    // Each probe: the first of its store methods that exists in this build.
    const probes: Array<{ label: string; kind: StoreKind; calls: Array<[string, unknown[]]> }> = [
      { label: 'read checkpoints', kind: 'steps', calls: [['loadStepMemos', [id]]] },
      {
        label: 'step checkpoint',
        kind: 'steps',
        calls: [
          [
            'insertCompletedSteps',
            [
              [
                {
                  taskId: id,
                  claimToken,
                  stepKey: 's1',
                  outputJson: null,
                  compensationFn: null,
                  attempt: 1,
                  startedAt: new Date(),
                  completionSeq: 1,
                },
              ],
            ],
          ],
        ],
      },
      {
        label: 'completion',
        kind: 'tasks',
        calls: [['complete', [[id], [claimToken], [null]]]],
      },
      { label: 'heartbeat of 1 task', kind: 'tasks', calls: [['renew', [[id], [claimToken]]]] },
    ];
    const times: StatementTime[] = [];
    const lines = [
      `Server-side time of one task's statements at ${ctx.sizes.claimDepths.large} pending (EXPLAIN ANALYZE, median of ${REPETITIONS}, each rolled back; no commit, so no WAL flush):`,
      '',
    ];
    const measured: Array<[string, Statement | undefined]> = [[`claim (TaskTransitions.claim, batch of 1)`, claim]];
    for (const probe of probes) {
      let found: [string, Statement | undefined] = [
        `${probe.label}: no ${probe.calls.map(([method]) => method).join(' / ')} in this build`,
        undefined,
      ];
      for (const [method, args] of probe.calls) {
        const sent = await captureStoreCall(probe.kind, method, args);
        if (sent) {
          found = [`${probe.label} (${probe.kind === 'tasks' ? 'TaskTransitions' : 'StepStore'}.${method})`, sent[sent.length - 1]];
          break;
        }
      }
      measured.push(found);
    }
    for (const [label, statement] of measured) {
      if (!statement) {
        lines.push(`- ${label}: not measured`);
        continue;
      }
      const planning: number[] = [];
      const execution: number[] = [];
      const { setup, last } = splitStatements(statement);
      for (let i = 0; i < REPETITIONS; i++) {
        await client.query('SAVEPOINT bench_statement');
        try {
          for (const text of setup) await client.query(text);
          const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${last.text}`, last.values);
          const plan = (rows[0] as { 'QUERY PLAN': Array<{ 'Planning Time': number; 'Execution Time': number }> })['QUERY PLAN'][0];
          planning.push(plan['Planning Time']);
          execution.push(plan['Execution Time']);
        } finally {
          await client.query('ROLLBACK TO SAVEPOINT bench_statement');
        }
      }
      const plans = statement.name ? await preparedPlans(client, `bench_probe_${times.length}`, statement) : undefined;
      const time = { statement: label, planningMs: median(planning), executionMs: median(execution), ...plans };
      times.push(time);
      const planned = plans
        ? `as a prepared statement run ${PREPARED_RUNS} times: ${plans.customPlans} custom plan(s), ${plans.genericPlans} generic`
        : 'not a prepared statement: planned on every call';
      lines.push(`- ${label}: planning ${time.planningMs.toFixed(3)} ms, execution ${time.executionMs.toFixed(3)} ms; ${planned}`);
    }
    rawSection(ctx, 'statementTimes').times = times;
    return lines;
  } finally {
    await client.query('ROLLBACK');
  }
}
