import { Client } from 'pg';
import { clientExecutor, DuraflowDatabase } from '../libs/duraflow/src/persistence/duraflow-database';
import { TaskTransitions } from '../libs/duraflow/src/persistence/lifecycle/task-transitions';
import { ClaimableWorkflows } from '../libs/duraflow/src/persistence/lifecycle/task-lifecycle';
import { useTestBed } from './support/test-bed';

/*
 * The claim's plan does not depend on the table's statistics. A queue's statistics are
 * usually older than its backlog (a new deployment never analyzed, a table analyzed while
 * empty or while every task was finished, then a burst of submits); whatever they say, every
 * claim the worker sends walks idx_agent_tasks_claim in its order and stops after its limit:
 * no Sort node, no bitmap or sequential scan, so a claim costs the same at any queue depth.
 *
 * The plans are those of the statements the store really sends (its planner settings
 * included), reported by auto_explain in EXPLAIN's JSON format.
 */

const BACKLOG = 50_000;
const REGISTERED = ['claim-a', 'claim-b'];
/**
 * What the worker sends: its registered workflows (a name alone is version 1; with versions, the
 * (name, version) pairs of a rolling deploy), and from one free slot to `maxQueuedTasks`.
 */
const SHAPES: Array<[ClaimableWorkflows, number]> = [
  [['claim-a'], 1],
  [['claim-a'], 10],
  [[...REGISTERED, 'not-submitted'], 20],
  [REGISTERED, 1_000],
  [[{ name: 'claim-a', versions: [2] }], 10],
  [[{ name: 'claim-a', versions: [1, 2] }, 'claim-b'], 1_000],
];
/** The one plan: an ordered walk of the claim index, then each claimed row by primary key. */
const WALK = 'Update > Nested Loop > (Subquery Scan > Limit > LockRows > Index Scan idx_agent_tasks_claim, Index Scan agent_tasks_pkey)';

interface PlanNode {
  'Node Type': string;
  Operation?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

/** `Update > Nested Loop > (…, …)`: node types (index scans with their index), children in brackets. */
function outline(node: PlanNode): string {
  const label = node.Operation ?? `${node['Node Type']}${node['Index Name'] ? ` ${node['Index Name']}` : ''}`;
  const children = node.Plans ?? [];
  if (!children.length) return label;
  return `${label} > ${children.length === 1 ? outline(children[0]) : `(${children.map(outline).join(', ')})`}`;
}

function nodeTypes(node: PlanNode): string[] {
  return [node['Node Type'], ...(node.Plans ?? []).flatMap(nodeTypes)];
}

describe('The claim', () => {
  const bed = useTestBed();
  /** A connection that reports the plan of every statement it runs (auto_explain, as NOTICEs). */
  let explained: Client;
  let plans: PlanNode[] = [];

  beforeAll(async () => {
    // Nothing analyzes the table behind the test's back: its statistics are what each state says.
    await bed.db.client.query('ALTER TABLE agent_tasks SET (autovacuum_enabled = false)');
    explained = bed.closeLater(new Client({ connectionString: bed.db.url }), (client) => client.end());
    await explained.connect();
    explained.on('notice', (notice) => {
      const json = /plan:\n([\s\S]*)$/.exec(notice.message ?? '')?.[1];
      if (json) plans.push(JSON.parse(json).Plan);
    });
    for (const setting of [
      `LOAD 'auto_explain'`,
      'SET auto_explain.log_min_duration = 0',
      'SET auto_explain.log_level = notice',
      'SET auto_explain.log_format = json',
    ]) {
      await explained.query(setting);
    }
  }, 60_000);

  /**
   * BACKLOG pending tasks, one statement: three priorities, most of them of the registered
   * workflows, some scheduled for tomorrow, some in the past, some soft-deleted, some started on
   * version 2 or on version 1 spelled out, some held by the determinism guard.
   */
  async function insertBacklog(): Promise<void> {
    await bed.db.client.query(
      `INSERT INTO agent_tasks (workflow_name, input, priority, scheduled_at, deleted_at, created_at, workflow_version, held_at)
       SELECT CASE WHEN g % 11 = 0 THEN 'elsewhere' WHEN g % 7 = 0 THEN 'claim-b' ELSE 'claim-a' END,
              '{}', g % 3,
              CASE WHEN g % 13 = 0 THEN now() + interval '1 day' WHEN g % 17 = 0 THEN now() - interval '1 hour' END,
              CASE WHEN g % 19 = 0 THEN now() END,
              now() - interval '1 hour' + g * interval '1 microsecond',
              CASE WHEN g % 5 = 0 THEN 2 WHEN g % 29 = 0 THEN 1 END,
              CASE WHEN g % 23 = 0 THEN now() END
       FROM generate_series(1, $1::int) AS g`,
      [BACKLOG],
    );
  }

  /** Rows the statistics believe the table holds (-1: never analyzed), and the rows it holds. */
  async function believedAndReal(): Promise<{ believed: number; real: number }> {
    const { rows } = await bed.db.client.query<{ believed: number; real: number }>(
      `SELECT (SELECT reltuples FROM pg_class WHERE oid = 'agent_tasks'::regclass)::int AS believed,
              (SELECT count(*) FROM agent_tasks)::int AS real`,
    );
    return rows[0];
  }

  /** The first `limit` runnable tasks of `workflows` (version 1 for a name alone) in the claim order, read without the store. */
  async function firstInClaimOrder(workflows: ClaimableWorkflows, limit: number): Promise<string[]> {
    const pairs = workflows.flatMap((workflow) =>
      typeof workflow === 'string' ? [[workflow, 1] as const] : workflow.versions.map((version) => [workflow.name, version] as const),
    );
    const { rows } = await bed.db.client.query<{ id: string }>(
      `SELECT id FROM agent_tasks
       WHERE status = 'pending' AND deleted_at IS NULL AND (scheduled_at IS NULL OR scheduled_at <= now()) AND held_at IS NULL
         AND (workflow_name, coalesce(workflow_version, 1)) IN (SELECT * FROM unnest($1::varchar[], $2::int[]))
       ORDER BY priority DESC, COALESCE(scheduled_at, created_at), id LIMIT $3`,
      [pairs.map(([name]) => name), pairs.map(([, version]) => version), limit],
    );
    return rows.map((row) => row.id).sort();
  }

  /** The lifecycle's moves over one connection of its own. */
  function storeOn(client: Client): TaskTransitions {
    return new TaskTransitions(clientExecutor(client) as DuraflowDatabase);
  }

  /** Runs TaskTransitions.claim on the explained connection, rolled back: its plan and what it claimed. */
  async function claimOnce(names: ClaimableWorkflows, limit: number): Promise<{ plan: PlanNode; claimed: string[] }> {
    plans = [];
    await explained.query('BEGIN');
    try {
      const claimed = await storeOn(explained).claim('plan-test', names, limit);
      const updates = plans.filter((plan) => plan.Operation === 'Update');
      if (updates.length !== 1) throw new Error(`expected the plan of one UPDATE, got ${JSON.stringify(plans.map(outline))}`);
      return { plan: updates[0], claimed: claimed.map(({ task }) => task.id).sort() };
    } finally {
      await explained.query('ROLLBACK');
    }
  }

  function expectOrderedWalks(): void {
    it.each(SHAPES)(
      'walks the claim index for a claim of %j, limit %d, and claims the first tasks in the claim order',
      async (names, limit) => {
        const { plan, claimed } = await claimOnce(names, limit);
        expect(nodeTypes(plan).filter((type) => /Sort|Bitmap|Seq Scan|Hash|Merge/.test(type))).toEqual([]);
        expect(outline(plan)).toBe(WALK);
        expect(claimed).toEqual(await firstInClaimOrder(names, limit));
      },
    );
  }

  describe('plan, on a table never analyzed', () => {
    beforeAll(insertBacklog);

    it('holds the backlog while its statistics know nothing of it', async () => {
      expect(await believedAndReal()).toEqual({ believed: -1, real: BACKLOG });
    });
    expectOrderedWalks();
  });

  describe('plan, on a table analyzed while it was empty', () => {
    beforeAll(async () => {
      await bed.db.client.query('TRUNCATE agent_tasks CASCADE');
      await bed.db.client.query('ANALYZE agent_tasks');
      await insertBacklog();
    });

    it('holds the backlog while its statistics say it is empty', async () => {
      expect(await believedAndReal()).toEqual({ believed: 0, real: BACKLOG });
    });
    expectOrderedWalks();
  });

  describe('plan, on a table analyzed while every task was finished', () => {
    beforeAll(async () => {
      await bed.db.client.query('TRUNCATE agent_tasks CASCADE');
      await bed.db.client.query(
        `INSERT INTO agent_tasks (workflow_name, status) SELECT 'claim-a', 'completed' FROM generate_series(1, 20000)`,
      );
      await bed.db.client.query('ANALYZE agent_tasks');
      await insertBacklog();
    });

    it('holds the backlog while its statistics know no pending task', async () => {
      const { rows } = await bed.db.client.query(
        `SELECT most_common_vals::text AS statuses FROM pg_stats WHERE tablename = 'agent_tasks' AND attname = 'status'`,
      );
      expect(rows).toEqual([{ statuses: '{completed}' }]);
      expect(await believedAndReal()).toEqual({ believed: 20_000, real: 20_000 + BACKLOG });
    });
    expectOrderedWalks();
  });

  describe('plan, on a table analyzed with its backlog', () => {
    beforeAll(() => bed.db.client.query('ANALYZE agent_tasks'));

    expectOrderedWalks();
  });

  describe('semantics', () => {
    beforeAll(async () => {
      await bed.db.client.query('TRUNCATE agent_tasks CASCADE');
      await insertBacklog();
    });

    it('lets two claims at once pass each other: the second takes the next tasks in the claim order (SKIP LOCKED)', async () => {
      const other = new Client({ connectionString: bed.db.url });
      await other.connect();
      try {
        await explained.query('BEGIN');
        await other.query('BEGIN');
        const first = await storeOn(explained).claim('first', REGISTERED, 10);
        const second = await storeOn(other).claim('second', REGISTERED, 10);
        const ids = (claimed: typeof first) => claimed.map(({ task }) => task.id);
        expect([first.length, second.length]).toEqual([10, 10]);
        const firstTwenty = await firstInClaimOrder(REGISTERED, 20);
        expect([...ids(first), ...ids(second)].sort()).toEqual(firstTwenty);
        expect(ids(first).sort()).toEqual(await firstInClaimOrder(REGISTERED, 10));
      } finally {
        await other.query('ROLLBACK');
        await explained.query('ROLLBACK');
        await other.end();
      }
    });

    it('writes the worker id and matches workflow names as they are, quotes and backslashes included; each task gets its own token', async () => {
      const odd = `it's \\ "odd"`;
      const workerId = `O'Brien \\ "w" --`;
      const { rows } = await bed.db.client.query<{ id: string }>(
        `INSERT INTO agent_tasks (workflow_name, priority) SELECT $1, 100 FROM generate_series(1, 2) RETURNING id`,
        [odd],
      );
      try {
        const claimed = await storeOn(bed.db.client).claim(workerId, [odd], 5);
        expect(claimed.map(({ task }) => task.id).sort()).toEqual(rows.map((row) => row.id).sort());
        const stored = await bed.db.client.query(
          `SELECT worker_id, status, claim_token FROM agent_tasks WHERE workflow_name = $1 ORDER BY claim_token`,
          [odd],
        );
        expect(stored.rows.map((row) => [row.worker_id, row.status])).toEqual([
          [workerId, 'running'],
          [workerId, 'running'],
        ]);
        expect(claimed.map(({ claimToken }) => claimToken).sort()).toEqual(stored.rows.map((row) => row.claim_token));
        expect(new Set(stored.rows.map((row) => row.claim_token)).size).toBe(2);
      } finally {
        await bed.db.client.query(`DELETE FROM agent_tasks WHERE workflow_name = $1`, [odd]);
      }
    });

    it('refuses a limit that is not a whole number, and claims nothing', async () => {
      const before = await bed.db.client.query(`SELECT count(*)::int AS n FROM agent_tasks WHERE status = 'running'`);
      await expect(storeOn(bed.db.client).claim('w', REGISTERED, 1.5)).rejects.toThrow(RangeError);
      await expect(storeOn(bed.db.client).claim('w', REGISTERED, -1)).rejects.toThrow(RangeError);
      const after = await bed.db.client.query(`SELECT count(*)::int AS n FROM agent_tasks WHERE status = 'running'`);
      expect(after.rows).toEqual(before.rows);
    });
  });
});
