import { Pool } from 'pg';
import { claimLimitedTasksSql, preparedLimitedClaim } from '../libs/duraflow/src/persistence/lifecycle/claim-limited-tasks';
import { CLAIM_SETTINGS } from '../libs/duraflow/src/persistence/lifecycle/claim-tasks';
import { FlowLimits } from '../libs/duraflow/src/validation/flow-limits';
import { DuraflowDatabase } from '../libs/duraflow/src/persistence/duraflow-database';
import { FlowLimitsStore } from '../libs/duraflow/src/persistence/flow-limits.store';
import { SUBMIT_ONLY, useTestBed } from './support/test-bed';

/*
 * The limited claim's plan: whatever the statistics say and however deep the backlog, it reads
 * the flow-control indexes (the next key, a key's running count and first tasks) and locks rows
 * by index: no Sort, no sequential or bitmap scan, so its cost follows the batch, not the backlog.
 * And it takes what the limits and the round-robin over keys say, in the claim order per key.
 */

const BACKLOG = 50_000;
const CAPPED: FlowLimits = { workflowName: 'capped', concurrency: 7, concurrencyKey: null, keyConcurrency: null, rateLimit: null };
const KEYED: FlowLimits = {
  workflowName: 'keyed',
  concurrency: null,
  concurrencyKey: (input) => String(input),
  keyConcurrency: 2,
  rateLimit: { limit: 1_000, periodMs: 60_000, perKey: true },
};

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Index Cond'?: string;
  Plans?: PlanNode[];
}

/** The indexes the limited claim is written for; any other may serve only a count of running tasks (a few rows). */
const FLOW_INDEXES = [
  'idx_agent_tasks_flow_pending',
  'idx_agent_tasks_flow_running',
  'agent_tasks_pkey',
  'flow_limits_pkey',
  'idx_flow_starts_window',
];

function nodes(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(nodes)];
}

describe('The limited claim', () => {
  const bed = useTestBed();

  beforeAll(async () => {
    await bed.db.client.query('ALTER TABLE agent_tasks SET (autovacuum_enabled = false)');
    // An unlimited workflow's backlog first in the claim order, then the limited ones: 'keyed'
    // over 1,000 keys (key k0 holds the oldest tasks), 'capped' with the key ''.
    await bed.db.client.query(
      `INSERT INTO agent_tasks (workflow_name, input, concurrency_key, priority, created_at)
       SELECT CASE WHEN g <= $1 / 5 THEN 'plain' WHEN g % 2 = 0 THEN 'keyed' ELSE 'capped' END, '{}',
              CASE WHEN g <= $1 / 5 THEN NULL WHEN g % 2 = 0 THEN 'k' || (g / 2 % 1000) ELSE '' END,
              g % 3, now() - interval '1 hour' + g * interval '1 microsecond'
       FROM generate_series(1, $1::int) AS g`,
      [BACKLOG],
    );
  });

  /** The plan of the claim statement (after its settings and lock), rolled back. */
  async function planOf(flow: FlowLimits, limit: number): Promise<PlanNode[]> {
    const [settings, lock, claim] = claimLimitedTasksSql(CLAIM_SETTINGS, 'plan-test', flow, [1], limit).split(/;\n/);
    await bed.db.client.query('BEGIN');
    try {
      await bed.db.client.query(settings);
      await bed.db.client.query(lock);
      const { rows } = await bed.db.client.query(`EXPLAIN (FORMAT JSON) ${claim}`);
      return nodes(rows[0]['QUERY PLAN'][0].Plan);
    } finally {
      await bed.db.client.query('ROLLBACK');
    }
  }

  /** The generic plan of the prepared claim (what a connection caches and reuses: FlowLimitsStore.claimLimitedTasks), rolled back. */
  async function genericPlanOf(flow: FlowLimits, limit: number): Promise<PlanNode[]> {
    const statement = preparedLimitedClaim(flow, [1]);
    await bed.db.client.query(`PREPARE ${statement.name}(text, int) AS ${statement.text}`);
    await bed.db.client.query('BEGIN');
    try {
      await bed.db.client.query(`${CLAIM_SETTINGS}, set_config('plan_cache_mode', 'force_generic_plan', true)`);
      await bed.db.client.query(statement.lock);
      const { rows } = await bed.db.client.query(`EXPLAIN (FORMAT JSON) EXECUTE ${statement.name}('plan-test', ${limit})`);
      return nodes(rows[0]['QUERY PLAN'][0].Plan);
    } finally {
      await bed.db.client.query('ROLLBACK');
      await bed.db.client.query(`DEALLOCATE ${statement.name}`);
    }
  }

  function expectIndexWalks(plan: PlanNode[]): void {
    expect(plan.filter((node) => /Sort|Seq Scan|Bitmap/.test(node['Node Type'])).map((node) => node['Node Type'])).toEqual([]);
    const scans = plan.filter((node) => node['Index Name']);
    expect(scans.some((node) => node['Index Name'] === 'idx_agent_tasks_flow_pending')).toBe(true);
    // With statistics that see no running task, the planner may count running tasks through the
    // status index: a few rows (what the workers run), never the pending backlog.
    for (const node of scans.filter((scan) => !FLOW_INDEXES.includes(scan['Index Name']!))) {
      expect([node['Index Name'], node['Index Cond']]).toEqual([node['Index Name'], expect.stringContaining(`'running'`)]);
    }
  }

  it.each([
    ['never analyzed', false],
    ['analyzed', true],
  ])('walks the flow-control indexes, never a sort or a scan of the backlog (statistics %s)', async (_, analyze) => {
    if (analyze) await bed.db.client.query('ANALYZE agent_tasks');
    for (const flow of [CAPPED, KEYED]) for (const limit of [1, 10, 100]) expectIndexWalks(await planOf(flow, limit));
  });

  it.each([
    ['never analyzed', false],
    ['analyzed', true],
  ])('prepared, its generic plan walks the same indexes (statistics %s)', async (_, analyze) => {
    if (analyze) await bed.db.client.query('ANALYZE agent_tasks');
    for (const flow of [CAPPED, KEYED]) for (const limit of [1, 10, 100]) expectIndexWalks(await genericPlanOf(flow, limit));
  });

  it('takes at most the workflow limit, in the claim order, and leaves every other task pending', async () => {
    await bed.db.client.query('BEGIN');
    try {
      const results = (await bed.db.client.query(claimLimitedTasksSql(CLAIM_SETTINGS, 'w', CAPPED, [1], 10))) as unknown as Array<{
        rows: Array<{ id: string }>;
      }>;
      const claimed = results[results.length - 1].rows.map((row) => row.id).sort();
      const { rows: first } = await bed.db.client.query<{ id: string }>(
        `SELECT id FROM agent_tasks WHERE workflow_name = 'capped' ORDER BY priority DESC, created_at, id LIMIT 7`,
      );
      expect(claimed).toEqual(first.map((row) => row.id).sort());
      const { rows: running } = await bed.db.client.query(`SELECT count(*)::int AS n FROM agent_tasks WHERE status = 'running'`);
      expect(running).toEqual([{ n: 7 }]);
    } finally {
      await bed.db.client.query('ROLLBACK');
    }
  });

  it('serves keys in round-robin from where the last claim stopped, at most keyConcurrency each', async () => {
    const claim = async (limit: number) => {
      const results = (await bed.db.client.query(claimLimitedTasksSql(CLAIM_SETTINGS, 'w', KEYED, [1], limit))) as unknown as Array<{
        rows: Array<{ concurrency_key: string }>;
      }>;
      return results[results.length - 1].rows.map((row) => row.concurrency_key);
    };
    await bed.db.client.query('BEGIN');
    try {
      // Keys in key order from the start: k0, k1, k10, k100, k101 ... two tasks each.
      const first = await claim(6);
      expect(first.sort()).toEqual(['k0', 'k0', 'k1', 'k1', 'k10', 'k10']);
      // The next claim starts after k10, not at k0 again (and k0, k1, k10 are at their limit anyway).
      const second = await claim(4);
      expect(second.sort()).toEqual(['k100', 'k100', 'k101', 'k101']);
      const { rows } = await bed.db.client.query(`SELECT key_cursor FROM flow_limits WHERE workflow_name = 'keyed'`);
      expect(rows).toEqual([{ key_cursor: 'k101' }]);
    } finally {
      await bed.db.client.query('ROLLBACK');
    }
  });

  describe('through FlowLimitsStore (prepared once per connection)', () => {
    let store: FlowLimitsStore;
    let db: DuraflowDatabase;
    const PREPARED: FlowLimits = { ...CAPPED, workflowName: 'prepared-capped', concurrency: 2 };

    beforeAll(async () => {
      const app = await bed.start({ duraflow: SUBMIT_ONLY });
      store = app.get(FlowLimitsStore);
      db = app.get(DuraflowDatabase);
      await bed.db.client.query(
        `INSERT INTO agent_tasks (workflow_name, input, concurrency_key) SELECT 'prepared-capped', '{}', '' FROM generate_series(1, 5)`,
      );
    });

    it('claims within the limit on each call, also on a connection whose statements were deallocated', async () => {
      expect(await store.claimLimitedTasks('p1', PREPARED, [1], 10)).toHaveLength(2);
      // The limit is full: the same prepared statement (cached plan) on the next call sees it.
      expect(await store.claimLimitedTasks('p1', PREPARED, [1], 10)).toHaveLength(0);
      await bed.db.client.query(
        `UPDATE agent_tasks SET status = 'completed' WHERE workflow_name = 'prepared-capped' AND status = 'running'`,
      );
      // DEALLOCATE ALL on every connection of the pool (each held until all ran), until the one
      // that prepared the claim was among them (the app's own work may hold one for a moment).
      const pool = (db as unknown as { pool: Pool }).pool;
      let deallocated = 0;
      for (let attempt = 0; attempt < 50 && !deallocated; attempt++) {
        let release!: () => void;
        const allHeld = new Promise<void>((resolve) => (release = resolve));
        const held = Array.from({ length: pool.totalCount }, () =>
          db.onConnection(async (client) => {
            const { rows } = await client.query(`SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name LIKE 'duraflow_flow_%'`);
            await client.query('DEALLOCATE ALL');
            await allHeld;
            return rows[0].n as number;
          }),
        );
        while (pool.idleCount > 0) await new Promise((resolve) => setTimeout(resolve, 5));
        release();
        deallocated = (await Promise.all(held)).reduce((sum, n) => sum + n, 0);
      }
      expect(deallocated).toBe(1);
      expect(await store.claimLimitedTasks('p1', PREPARED, [1], 10)).toHaveLength(2);
      const { rows } = await bed.db.client.query(
        `SELECT status, count(*)::int AS n FROM agent_tasks WHERE workflow_name = 'prepared-capped' GROUP BY status ORDER BY status`,
      );
      expect(rows).toEqual([
        { status: 'completed', n: 2 },
        { status: 'pending', n: 1 },
        { status: 'running', n: 2 },
      ]);
    });
  });
});
