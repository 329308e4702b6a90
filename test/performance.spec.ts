import {
  DURAFLOW_DEFAULTS,
  IdempotencyKeyConflictError,
  TaskStatus,
  WorkerService,
  workflow,
  WorkflowContext,
  WorkflowService,
} from '@duraflow/nestjs';
import { TaskStatsRollup } from '../libs/duraflow/src/background/task-stats-rollup';
import { countDelta, installQueryCounter, queryCounts } from '../bench/query-counter';
import { captureStoreCall, Statement } from '../bench/sql-capture';
const { prepareValue } = require('pg/lib/utils') as { prepareValue: (value: unknown) => unknown };
import { SUBMIT_ONLY, useTestBed } from './support/test-bed';
import { eventually, sleep } from './support/waiting';

/**
 * Issue 33: an idle poll is one transaction whatever the limited workflows, concurrent submits
 * share their round trips (with idempotency, flow-control keys and tags as a lone submit writes
 * them), the dashboard's rollup sends nothing while no hour closed, the default concurrency, and
 * the fenced writes of many claims find their rows through the primary key whatever the statistics.
 */
const plain = workflow('perf-plain', async (ctx: WorkflowContext) => ctx.step.run('only', () => 'done'));
const capped = workflow('perf-capped', async (ctx: WorkflowContext) => ctx.step.run('only', () => 'done'), { concurrency: 2 });
const keyed = workflow<{ tenant: string; n: number }>('perf-keyed', async (ctx) => ctx.input.n, {
  concurrencyKey: (input) => input.tenant,
  keyConcurrency: 1,
});

installQueryCounter();

/** Every node of an `EXPLAIN (FORMAT JSON)` plan, depth first. */
function planNodes(node: Record<string, any>): Array<Record<string, any>> {
  return [node, ...((node.Plans as Array<Record<string, any>>) ?? []).flatMap(planNodes)];
}

function counted(names: string[], during: () => Promise<unknown>): Promise<Record<string, number>> {
  const before = queryCounts();
  return during().then(() => {
    const delta = countDelta(before, queryCounts());
    return Object.fromEntries(names.map((name) => [name, delta[name] ?? 0]));
  });
}

describe('performance (issue 33)', () => {
  const bed = useTestBed({ databasePerTest: true });

  it('runs 100 tasks at once by default', async () => {
    expect(DURAFLOW_DEFAULTS.worker.concurrency).toBe(100);
    const app = await bed.start({ duraflow: { workflows: [plain], worker: { enabled: false } } });
    expect(app.get(WorkerService).stats().concurrency).toBe(100);
  });

  it('sends one claim round trip per idle poll with a limited workflow, and still finds a task nobody announced', async () => {
    const app = await bed.start({
      duraflow: { workflows: [plain, capped], worker: { pollIntervalMs: 50, maxIdlePollIntervalMs: 200 }, reaper: { enabled: false } },
    });
    await app.get(WorkerService).start();
    await sleep(1_000);
    const idle = await counted(['duraflow_claim_tasks', 'duraflow_claim_limited_tasks'], () => sleep(2_000));
    // About ten polls at 200 ms: each the plain claim with the probe, and no limited claim.
    expect(idle.duraflow_claim_tasks).toBeGreaterThan(3);
    expect(idle.duraflow_claim_limited_tasks).toBe(0);

    // Inserted past the library: no NOTIFY, so only the poll's probe can find it.
    const { rows } = await bed.db.client.query<{ id: string }>(
      `INSERT INTO agent_tasks (workflow_name, input, concurrency_key) VALUES ('perf-capped', '{}', '') RETURNING id`,
    );
    const done = await app.get(WorkflowService).waitFor(rows[0].id, { timeoutMs: 20_000 });
    expect(done.status).toBe(TaskStatus.COMPLETED);
  });

  it('writes concurrent submits in shared statements, each caller getting its own task', async () => {
    const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [plain] } });
    const workflows = app.get(WorkflowService);
    await workflows.submit('perf-plain', { warm: true });
    let tasks: Array<{ id: string; input: unknown }> = [];
    const statements = await counted(['duraflow_insert_task', 'duraflow_insert_tasks_together'], async () => {
      tasks = await Promise.all(Array.from({ length: 50 }, (_, n) => workflows.submit('perf-plain', { n })));
    });
    expect(statements.duraflow_insert_task + statements.duraflow_insert_tasks_together).toBeLessThan(50);
    expect(statements.duraflow_insert_tasks_together).toBeGreaterThan(0);
    expect(new Set(tasks.map((task) => task.id)).size).toBe(50);
    const { rows } = await bed.db.client.query<{ id: string; input: { n: number }; status: string }>(
      `SELECT id, input, status FROM agent_tasks WHERE input ? 'n'`,
    );
    expect(rows).toHaveLength(50);
    const byId = new Map(rows.map((row) => [row.id, row]));
    tasks.forEach((task, n) => {
      expect(task.input).toEqual({ n });
      expect(byId.get(task.id)?.input).toEqual({ n });
      expect(byId.get(task.id)?.status).toBe('pending');
    });
  });

  it('keeps idempotency inside a shared statement: one task per key, a conflict for another input', async () => {
    const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [plain] } });
    const workflows = app.get(WorkflowService);
    const same = await Promise.all(
      Array.from({ length: 10 }, (_, n) =>
        workflows.submitWithResult('perf-plain', { order: 1 }, { idempotencyKey: 'order-1' }).then((result) => ({ n, ...result })),
      ),
    );
    expect(new Set(same.map((result) => result.task.id)).size).toBe(1);
    expect(same.filter((result) => result.created)).toHaveLength(1);

    const mixed = await Promise.allSettled([
      workflows.submit('perf-plain', { order: 2 }, { idempotencyKey: 'order-1' }),
      workflows.submit('perf-plain', { order: 3 }, { idempotencyKey: 'order-3' }),
      workflows.submit('perf-plain', { order: 2 }, { idempotencyKey: 'order-1' }),
      workflows.submit('perf-plain', { order: 4 }),
    ]);
    expect(mixed[0].status === 'rejected' && mixed[0].reason).toBeInstanceOf(IdempotencyKeyConflictError);
    expect(mixed[2].status === 'rejected' && mixed[2].reason).toBeInstanceOf(IdempotencyKeyConflictError);
    expect(mixed[1].status).toBe('fulfilled');
    expect(mixed[3].status).toBe('fulfilled');
    const { rows } = await bed.db.client.query(`SELECT idempotency_key, input FROM agent_tasks ORDER BY idempotency_key NULLS LAST`);
    expect(rows).toEqual([
      { idempotency_key: 'order-1', input: { order: 1 } },
      { idempotency_key: 'order-3', input: { order: 3 } },
      { idempotency_key: null, input: { order: 4 } },
    ]);
  });

  it('writes a shared statement row column for column as a lone submit writes it', async () => {
    const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [keyed] } });
    const workflows = app.get(WorkflowService);
    const options = { tags: { tenant: 'acme' }, priority: 3, maxRetries: 5 };
    const lone = await workflows.submit('perf-keyed', { tenant: 'acme', n: 0 }, options);
    const together = await Promise.all([1, 2, 3].map((n) => workflows.submit('perf-keyed', { tenant: 'acme', n }, options)));
    const columns = `workflow_name, status, priority, scheduled_at, max_retries, retry_count, idempotency_key, workflow_version,
                     concurrency_key, parent_task_id, parent_step_key, forked_from, forked_from_step, tags, input - 'n' AS input`;
    const read = async (id: string) => (await bed.db.client.query(`SELECT ${columns} FROM agent_tasks WHERE id = $1`, [id])).rows[0];
    const expected = await read(lone.id);
    expect(expected.concurrency_key).toBe('acme');
    for (const task of together) expect(await read(task.id)).toEqual(expected);
  });

  it('finds the rows of a batch of claims through the primary key on a table analyzed while nothing ran', async () => {
    // The trap: statistics gathered while every task was pending say one task runs at most, so a
    // plan that reads the running tasks by status looks free; with 2,000 running it walks them
    // all for each claim of the batch (a drain's completions took 5x the claim's time so).
    const c = bed.db.client;
    await c.query(`INSERT INTO agent_tasks (workflow_name, input) SELECT 'perf-plain', '{}' FROM generate_series(1, 2000)`);
    await c.query('ANALYZE agent_tasks');
    await c.query(
      `UPDATE agent_tasks SET status = 'running', worker_id = 'w', claim_token = gen_random_uuid(), started_at = now(), heartbeat_at = now()`,
    );
    const { rows: claims } = await c.query<{ id: string; claim_token: string }>(
      `SELECT id, claim_token FROM agent_tasks ORDER BY random() LIMIT 100`,
    );
    const ids = claims.map((claim) => claim.id);
    const tokens = claims.map((claim) => claim.claim_token);
    const steps = claims.map((claim, n) => ({
      taskId: claim.id,
      claimToken: claim.claim_token,
      stepKey: 'only',
      outputJson: null,
      compensationFn: null,
      attempt: 1,
      startedAt: new Date(),
      completionSeq: n,
    }));
    const statements: Array<[string, Statement[] | undefined]> = [
      ['complete', await captureStoreCall('tasks', 'complete', [ids, tokens, ids.map(() => '{"ok":true}')])],
      ['renew', await captureStoreCall('tasks', 'renew', [ids, tokens])],
      ['release', await captureStoreCall('tasks', 'release', [ids, tokens])],
      ['checkpoints', await captureStoreCall('steps', 'insertCompletedSteps', [steps])],
    ];
    for (const [move, captured] of statements) {
      expect(captured).toHaveLength(1);
      const [statement] = captured!;
      // As a long-lived pool runs it: a prepared statement on its generic plan.
      await c.query('BEGIN');
      try {
        await c.query(`SET LOCAL plan_cache_mode = force_generic_plan`);
        await c.query(`PREPARE fenced_batch(${statement.values.map(() => 'unknown').join(', ')}) AS ${statement.text}`);
        // EXECUTE takes its arguments as literals: each value as node-postgres would send it.
        const literals = statement.values.map((value) => (value === null ? 'NULL' : c.escapeLiteral(String(prepareValue(value)))));
        const { rows } = await c.query(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE fenced_batch(${literals.join(', ')})`);
        const nodes = planNodes(rows[0]['QUERY PLAN'][0].Plan);
        const reads = nodes.filter((node) => node['Relation Name'] === 'agent_tasks' && node['Node Type'] !== 'ModifyTable');
        expect({ move, reads: reads.map((node) => `${node['Node Type']} ${node['Index Name'] ?? ''}`.trim()) }).toEqual({
          move,
          reads: reads.map(() => 'Index Scan agent_tasks_pkey'),
        });
        expect({ move, rowsPassedOver: nodes.reduce((sum, node) => sum + (node['Rows Removed by Join Filter'] ?? 0), 0) }).toEqual({
          move,
          rowsPassedOver: 0,
        });
      } finally {
        await c.query('ROLLBACK');
        await c.query('DEALLOCATE ALL');
      }
    }
  });

  it("keeps the rollup quiet until the next hour closes (the leader's pass sends nothing in between)", async () => {
    const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [plain], reaper: { enabled: false } } });
    const rollup = app.get(TaskStatsRollup, { strict: false });
    const now = new Date('2026-12-02T05:30:00Z');
    expect(rollup.due(now.getTime())).toBe(true);
    await rollup.rollUp(now);
    expect(rollup.due(now.getTime())).toBe(false);
    // Two minutes past the hour (the grace of a transaction begun in it): 05:00–06:00 may be added.
    expect(rollup.due(Date.parse('2026-12-02T06:01:00Z'))).toBe(false);
    expect(rollup.due(Date.parse('2026-12-02T06:02:00Z'))).toBe(true);
    await eventually('the rollup row says where it stands', async () => {
      const { rows } = await bed.db.client.query(`SELECT rolled_until FROM duraflow_task_rollup_state`);
      return rows[0]?.rolled_until.toISOString() === '2026-12-02T05:00:00.000Z';
    });
  });
});
