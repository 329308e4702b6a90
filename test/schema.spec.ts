import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { DataSource, IsNull } from 'typeorm';
import { AgentTask, DeadLetter, DURAFLOW_ENTITIES, runDuraflowMigrations, StepRun } from '@duraflow/nestjs';
import {
  CHECK_STEP_MEMOIZATION,
  FIND_COMPENSABLE_STEPS,
  FIND_FAILED_COMPENSATIONS,
  FIND_PENDING_TASKS,
  FIND_STALE_RUNNING_TASKS,
  forTask,
  SEED_TEXT,
} from './fixtures/schema/seed-queries';
import { useTestBed } from './support/test-bed';
import { DURAFLOW_MIGRATION_NAMES } from './support/migration-names';

const execFileAsync = promisify(execFile);
const REPO_ROOT = join(__dirname, '..');
const MIGRATIONS = DURAFLOW_MIGRATION_NAMES;
/** The seed's tables, TypeORM's migrations table, and the tables later migrations add (never a seed table changed). */
const TABLES = [
  'agent_tasks',
  'dead_letter_queue',
  'duraflow_event_deliveries',
  'duraflow_event_groups',
  'duraflow_event_subscriptions',
  'duraflow_leader',
  'duraflow_published_events',
  'duraflow_schedule_ticks',
  'duraflow_schedules',
  'duraflow_task_rollup',
  'duraflow_task_rollup_state',
  'flow_limits',
  'flow_starts',
  'migrations',
  'step_runs',
  'task_callbacks',
  'task_events',
  'task_logs',
  'task_signals',
  'task_stream_chunks',
  'task_streams',
];
/** npx and tsx start slowly when other suites load the machine. */
const CHILD_PROCESS_TIMEOUT_MS = 120_000;

/** name, data_type, character_maximum_length, is_nullable, column_default (as PostgreSQL prints it) */
type ColumnRow = [string, string, number | null, 'YES' | 'NO', string | null];

// Seed 000, "CREATE TABLE agent_tasks", one row per line of the seed.
const AGENT_TASKS_SEED_COLUMNS: ColumnRow[] = [
  ['id', 'uuid', null, 'NO', 'gen_random_uuid()'],
  ['workflow_name', 'character varying', 255, 'NO', null],
  ['status', 'character varying', 50, 'NO', "'pending'::character varying"],
  ['input', 'jsonb', null, 'YES', "'{}'::jsonb"],
  ['output', 'jsonb', null, 'YES', null],
  ['error', 'jsonb', null, 'YES', null],
  ['priority', 'integer', null, 'YES', '0'],
  ['scheduled_at', 'timestamp with time zone', null, 'YES', null],
  ['started_at', 'timestamp with time zone', null, 'YES', null],
  ['completed_at', 'timestamp with time zone', null, 'YES', null],
  ['heartbeat_at', 'timestamp with time zone', null, 'YES', null],
  ['worker_id', 'character varying', 255, 'YES', null],
  ['retry_count', 'integer', null, 'YES', '0'],
  ['max_retries', 'integer', null, 'YES', '3'],
  ['created_at', 'timestamp with time zone', null, 'YES', 'now()'],
  ['updated_at', 'timestamp with time zone', null, 'YES', 'now()'],
  ['deleted_at', 'timestamp with time zone', null, 'YES', null],
];

// Seed 000, "CREATE TABLE step_runs".
const STEP_RUNS_SEED_COLUMNS: ColumnRow[] = [
  ['id', 'uuid', null, 'NO', 'gen_random_uuid()'],
  ['task_id', 'uuid', null, 'NO', null],
  ['step_key', 'character varying', 255, 'NO', null],
  ['status', 'character varying', 50, 'NO', "'pending'::character varying"],
  ['input', 'jsonb', null, 'YES', null],
  ['output', 'jsonb', null, 'YES', null],
  ['error', 'jsonb', null, 'YES', null],
  ['compensation_fn', 'text', null, 'YES', null],
  ['compensated_at', 'timestamp with time zone', null, 'YES', null],
  ['started_at', 'timestamp with time zone', null, 'YES', null],
  ['completed_at', 'timestamp with time zone', null, 'YES', null],
  ['created_at', 'timestamp with time zone', null, 'YES', 'now()'],
  ['attempt', 'integer', null, 'YES', '0'],
];

// Seed 000, "CREATE TABLE dead_letter_queue".
const DEAD_LETTER_QUEUE_SEED_COLUMNS: ColumnRow[] = [
  ['id', 'uuid', null, 'NO', 'gen_random_uuid()'],
  ['task_id', 'uuid', null, 'NO', null],
  ['step_id', 'uuid', null, 'NO', null],
  ['error', 'jsonb', null, 'YES', null],
  ['retry_count', 'integer', null, 'YES', '0'],
  ['created_at', 'timestamp with time zone', null, 'YES', 'now()'],
];

// The engine's own columns (migrations EngineColumns, SagaColumns, DurablePrimitives, TraceContext, FlowControl and SafeDeploys): nullable, no default, after the seed's.
const ENGINE_EXTRA_COLUMNS: Record<string, ColumnRow[]> = {
  agent_tasks: [
    ['idempotency_key', 'character varying', 255, 'YES', null],
    ['claim_token', 'uuid', null, 'YES', null],
    ['rollback_reason', 'character varying', 20, 'YES', null],
    ['parent_task_id', 'uuid', null, 'YES', null],
    ['parent_step_key', 'character varying', 255, 'YES', null],
    ['trace_context', 'jsonb', null, 'YES', null],
    ['concurrency_key', 'character varying', 255, 'YES', null],
    // SafeDeploys: the version a task started on, and the determinism guard's hold.
    ['workflow_version', 'integer', null, 'YES', null],
    ['held_at', 'timestamp with time zone', null, 'YES', null],
    // RetryAndFork: a task's history (its retries), and the task and step a fork came from.
    ['history', 'jsonb', null, 'YES', null],
    ['forked_from', 'uuid', null, 'YES', null],
    ['forked_from_step', 'character varying', 255, 'YES', null],
    // TaskTags: a task's tags, {} when none (the one engine column with a default: the filter never meets a null).
    ['tags', 'jsonb', null, 'NO', "'{}'::jsonb"],
  ],
  step_runs: [
    ['completion_seq', 'integer', null, 'YES', null],
    ['kind', 'character varying', 20, 'YES', null],
    ['wake_at', 'timestamp with time zone', null, 'YES', null],
  ],
  dead_letter_queue: [],
};

// Seed 000's five indexes, each statement copied from the seed.
const SEED_INDEXES: Record<string, string> = {
  idx_agent_tasks_status_scheduled_priority: `CREATE INDEX idx_agent_tasks_status_scheduled_priority
ON agent_tasks(status, scheduled_at, priority DESC)
WHERE status = 'pending';`,
  idx_agent_tasks_heartbeat: `CREATE INDEX idx_agent_tasks_heartbeat
ON agent_tasks(heartbeat_at)
WHERE status = 'running';`,
  idx_step_runs_task_step: `CREATE UNIQUE INDEX idx_step_runs_task_step
ON step_runs(task_id, step_key);`,
  idx_step_runs_compensation: `CREATE INDEX idx_step_runs_compensation
ON step_runs(task_id)
WHERE compensation_fn IS NOT NULL;`,
  idx_dlq_task_id: `CREATE INDEX idx_dlq_task_id ON dead_letter_queue(task_id);`,
};

/**
 * One spelling for the seed's CREATE INDEX and PostgreSQL's pg_indexes.indexdef: no schema
 * prefix, no `USING btree`, no casts PostgreSQL adds (`(status)::text = 'pending'::text`), no
 * parentheses, single spaces.
 */
function normaliseIndexDef(sql: string): string {
  return sql
    .replace(/;\s*$/, '')
    .replace(/\bpublic\./g, '')
    .replace(/\bUSING btree\b/gi, ' ')
    .replace(/::[a-z_]+(?: varying)?/gi, '')
    .replace(/[()]/g, ' ')
    .replace(/\s+/g, ' ')
    .replace(/ ,/g, ',')
    .trim()
    .toLowerCase();
}

async function columnsOf(client: Client, table: string): Promise<ColumnRow[]> {
  const { rows } = await client.query(
    `SELECT column_name, data_type, character_maximum_length, is_nullable, column_default
     FROM information_schema.columns
     WHERE table_schema = 'public' AND table_name = $1
     ORDER BY ordinal_position`,
    [table],
  );
  return rows.map((r) => [r.column_name, r.data_type, r.character_maximum_length, r.is_nullable, r.column_default]);
}

async function publicTables(client: Client): Promise<string[]> {
  const { rows } = await client.query(
    `SELECT table_name FROM information_schema.tables
     WHERE table_schema = 'public' AND table_type = 'BASE TABLE'
     ORDER BY table_name`,
  );
  return rows.map((r) => r.table_name);
}

async function insertTask(client: Client, values: Record<string, unknown>): Promise<string> {
  const columns = Object.keys(values);
  const { rows } = await client.query(
    `INSERT INTO agent_tasks (${columns.join(', ')})
     VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')}) RETURNING id`,
    Object.values(values),
  );
  return rows[0].id;
}

async function insertStep(client: Client, values: Record<string, unknown>): Promise<string> {
  const columns = Object.keys(values);
  const { rows } = await client.query(
    `INSERT INTO step_runs (${columns.join(', ')})
     VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')}) RETURNING id`,
    Object.values(values),
  );
  return rows[0].id;
}

/** Runs `fn` in a transaction that is rolled back, so a test leaves no rows behind. */
async function inRolledBackTransaction(client: Client, fn: () => Promise<void>): Promise<void> {
  await client.query('BEGIN');
  try {
    await fn();
  } finally {
    await client.query('ROLLBACK');
  }
}

const at = (minute: number) => new Date(Date.UTC(2024, 0, 1, 10, minute));

describe('schema (seed 000 "Database Schema")', () => {
  const bed = useTestBed();

  describe('tables', () => {
    it('has the three seed tables, TypeORM migrations table and the engine’s own tables (leader lease, signals, schedules, flow control), and no other table', async () => {
      expect(await publicTables(bed.db.client)).toEqual(TABLES);
    });

    it.each([
      ['agent_tasks', AGENT_TASKS_SEED_COLUMNS],
      ['step_runs', STEP_RUNS_SEED_COLUMNS],
      ['dead_letter_queue', DEAD_LETTER_QUEUE_SEED_COLUMNS],
    ])(
      '%s has exactly the seed columns (type, length, nullability, default) in seed order, then only the engine extras',
      async (table, seedColumns) => {
        expect(await columnsOf(bed.db.client, table)).toEqual([...seedColumns, ...ENGINE_EXTRA_COLUMNS[table]]);
      },
    );

    it('keeps each column default in pg_attrdef as the seed spells it (and the one engine default, tags)', async () => {
      const { rows } = await bed.db.client.query(
        `SELECT c.relname AS table, a.attname AS column, pg_get_expr(d.adbin, d.adrelid) AS default
         FROM pg_attrdef d
         JOIN pg_class c ON c.oid = d.adrelid
         JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
         WHERE c.relname IN ('agent_tasks', 'step_runs', 'dead_letter_queue')
         ORDER BY c.relname, a.attnum`,
      );
      const expected = Object.entries({
        agent_tasks: [...AGENT_TASKS_SEED_COLUMNS, ...ENGINE_EXTRA_COLUMNS.agent_tasks],
        dead_letter_queue: DEAD_LETTER_QUEUE_SEED_COLUMNS,
        step_runs: STEP_RUNS_SEED_COLUMNS,
      }).flatMap(([table, columns]) =>
        columns.filter(([, , , , dflt]) => dflt !== null).map(([column, , , , dflt]) => ({ table, column, default: dflt })),
      );
      expect(rows).toEqual(expected);
    });

    it('keeps the schedules in two tables of their own (migration Schedules), keyed for one task per tick', async () => {
      expect(await columnsOf(bed.db.client, 'duraflow_schedules')).toEqual([
        ['name', 'character varying', 200, 'NO', null],
        ['workflow_name', 'character varying', 255, 'NO', null],
        ['cron', 'character varying', 255, 'NO', null],
        ['timezone', 'character varying', 100, 'NO', null],
        ['last_tick_at', 'timestamp with time zone', null, 'YES', null],
        ['created_at', 'timestamp with time zone', null, 'NO', 'now()'],
        ['updated_at', 'timestamp with time zone', null, 'NO', 'now()'],
        ['paused_at', 'timestamp with time zone', null, 'YES', null],
      ]);
      expect(await columnsOf(bed.db.client, 'duraflow_schedule_ticks')).toEqual([
        ['schedule_name', 'character varying', 200, 'NO', null],
        ['tick_at', 'timestamp with time zone', null, 'NO', null],
        ['task_id', 'uuid', null, 'YES', null],
        ['created_at', 'timestamp with time zone', null, 'NO', 'now()'],
      ]);
      const { rows } = await bed.db.client.query(
        `SELECT conrelid::regclass::text AS table, pg_get_constraintdef(oid) AS definition FROM pg_constraint
         WHERE conrelid IN ('duraflow_schedules'::regclass, 'duraflow_schedule_ticks'::regclass) AND contype <> 'n' ORDER BY 1`,
      );
      expect(rows).toEqual([
        { table: 'duraflow_schedule_ticks', definition: 'PRIMARY KEY (schedule_name, tick_at)' },
        { table: 'duraflow_schedules', definition: 'PRIMARY KEY (name)' },
      ]);
    });
  });

  describe('constraints', () => {
    it('has exactly the seed constraints: the primary keys, the foreign key, UNIQUE(task_id, step_key)', async () => {
      // PostgreSQL 18 (the embedded one) also lists each NOT NULL here (contype n): nullability is the columns' test above.
      const { rows } = await bed.db.client.query(
        `SELECT conrelid::regclass::text AS table, contype, pg_get_constraintdef(oid) AS definition
         FROM pg_constraint
         WHERE conrelid IN ('agent_tasks'::regclass, 'step_runs'::regclass, 'dead_letter_queue'::regclass)
           AND contype <> 'n'
         ORDER BY 1, 2, 3`,
      );
      expect(rows).toEqual([
        { table: 'agent_tasks', contype: 'p', definition: 'PRIMARY KEY (id)' },
        { table: 'dead_letter_queue', contype: 'p', definition: 'PRIMARY KEY (id)' },
        {
          table: 'step_runs',
          contype: 'f',
          definition: 'FOREIGN KEY (task_id) REFERENCES agent_tasks(id) ON DELETE CASCADE',
        },
        { table: 'step_runs', contype: 'p', definition: 'PRIMARY KEY (id)' },
        { table: 'step_runs', contype: 'u', definition: 'UNIQUE (task_id, step_key)' },
      ]);
    });

    it('references agent_tasks(id) from step_runs.task_id with ON DELETE CASCADE (confdeltype c)', async () => {
      const { rows } = await bed.db.client.query(
        `SELECT confrelid::regclass::text AS referenced, confdeltype,
                (SELECT array_agg(attname::text) FROM pg_attribute
                 WHERE attrelid = conrelid AND attnum = ANY (conkey)) AS columns,
                (SELECT array_agg(attname::text) FROM pg_attribute
                 WHERE attrelid = confrelid AND attnum = ANY (confkey)) AS referenced_columns
         FROM pg_constraint
         WHERE contype = 'f' AND conrelid = 'step_runs'::regclass`,
      );
      expect(rows).toEqual([{ referenced: 'agent_tasks', confdeltype: 'c', columns: ['task_id'], referenced_columns: ['id'] }]);
    });

    it('deletes a task’s step runs when the task is deleted', async () => {
      await inRolledBackTransaction(bed.db.client, async () => {
        const taskId = await insertTask(bed.db.client, { workflow_name: 'order-processing' });
        await insertStep(bed.db.client, { task_id: taskId, step_key: 'validate-order' });
        await insertStep(bed.db.client, { task_id: taskId, step_key: 'charge-card' });
        await bed.db.client.query('DELETE FROM agent_tasks WHERE id = $1', [taskId]);
        const { rows } = await bed.db.client.query('SELECT count(*)::int AS n FROM step_runs WHERE task_id = $1', [taskId]);
        expect(rows[0].n).toBe(0);
      });
    });

    it('rejects a step run for a task that does not exist', async () => {
      await inRolledBackTransaction(bed.db.client, async () => {
        await expect(
          insertStep(bed.db.client, { task_id: '00000000-0000-4000-8000-000000000000', step_key: 'validate-order' }),
        ).rejects.toMatchObject({ code: '23503', constraint: 'step_runs_task_id_fkey' });
      });
    });

    it('rejects a second step run with the same task_id and step_key', async () => {
      await inRolledBackTransaction(bed.db.client, async () => {
        const taskId = await insertTask(bed.db.client, { workflow_name: 'order-processing' });
        await insertStep(bed.db.client, { task_id: taskId, step_key: 'validate-order' });
        await expect(insertStep(bed.db.client, { task_id: taskId, step_key: 'validate-order' })).rejects.toMatchObject({
          code: '23505',
        });
      });
    });

    it('lets dead_letter_queue rows outlive their task and step (the seed declares no foreign key there)', async () => {
      await inRolledBackTransaction(bed.db.client, async () => {
        const orphan = '00000000-0000-4000-8000-000000000001';
        await bed.db.client.query('INSERT INTO dead_letter_queue (task_id, step_id) VALUES ($1, $1)', [orphan]);
        const { rows } = await bed.db.client.query('SELECT count(*)::int AS n FROM dead_letter_queue WHERE task_id = $1', [orphan]);
        expect(rows[0].n).toBe(1);
      });
    });
  });

  describe('indexes', () => {
    it.each(Object.entries(SEED_INDEXES))('has the seed index %s with the seed definition', async (name, seedSql) => {
      const { rows } = await bed.db.client.query(`SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' AND indexname = $1`, [name]);
      expect(rows).toHaveLength(1);
      expect(normaliseIndexDef(rows[0].indexdef)).toBe(normaliseIndexDef(seedSql));
    });

    it('keeps the partial indexes partial: pending, running and compensable rows only', async () => {
      const { rows } = await bed.db.client.query(
        `SELECT c.relname AS index, pg_get_expr(i.indpred, i.indrelid) AS predicate
         FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
         WHERE c.relname = ANY ($1)
         ORDER BY c.relname`,
        [Object.keys(SEED_INDEXES)],
      );
      expect(rows).toEqual([
        { index: 'idx_agent_tasks_heartbeat', predicate: "((status)::text = 'running'::text)" },
        { index: 'idx_agent_tasks_status_scheduled_priority', predicate: "((status)::text = 'pending'::text)" },
        { index: 'idx_dlq_task_id', predicate: null },
        { index: 'idx_step_runs_compensation', predicate: '(compensation_fn IS NOT NULL)' },
        { index: 'idx_step_runs_task_step', predicate: null },
      ]);
    });

    it('has no index beyond the seed’s, the constraints’ and the engine’s documented ones', async () => {
      const { rows } = await bed.db.client.query(
        `SELECT indexname FROM pg_indexes
         WHERE schemaname = 'public' AND tablename IN ('agent_tasks', 'step_runs', 'dead_letter_queue')
         ORDER BY indexname`,
      );
      const constraintIndexes = ['agent_tasks_pkey', 'dead_letter_queue_pkey', 'step_runs_pkey', 'step_runs_task_id_step_key_key'];
      const engineIndexes = [
        'idx_agent_tasks_claim',
        'idx_agent_tasks_completed',
        'idx_agent_tasks_created',
        'idx_agent_tasks_flow_pending',
        'idx_agent_tasks_flow_running',
        'idx_agent_tasks_forked_from',
        'idx_agent_tasks_idempotency',
        'idx_agent_tasks_parent',
        'idx_agent_tasks_status_created',
        'idx_agent_tasks_tags',
        'idx_dlq_step_id',
      ];
      expect(rows.map((r) => r.indexname)).toEqual([...Object.keys(SEED_INDEXES), ...constraintIndexes, ...engineIndexes].sort());
    });
  });

  describe('the seed’s SQL examples', () => {
    it('are quoted here byte for byte from the seed', () => {
      for (const query of [
        FIND_COMPENSABLE_STEPS,
        FIND_PENDING_TASKS,
        FIND_STALE_RUNNING_TASKS,
        CHECK_STEP_MEMOIZATION,
        FIND_FAILED_COMPENSATIONS,
        ...Object.values(SEED_INDEXES),
      ]) {
        expect(SEED_TEXT).toContain(query);
      }
    });

    describe('run against the migrated schema', () => {
      let orderTask: string;
      let inFlightTask: string;
      let sagaTask: string;
      let freshRunner: string;
      let staleRunner: string;
      const pendingByRank: string[] = [];

      beforeAll(async () => {
        await bed.db.client.query('TRUNCATE agent_tasks, step_runs, dead_letter_queue');
        const c = bed.db.client;

        // Twelve pending tasks: two urgent ones created after ten ordinary ones, so the order
        // (priority DESC, created_at ASC) and the LIMIT both show in the result.
        const ordinary: string[] = [];
        for (let i = 0; i < 10; i++) {
          ordinary.push(await insertTask(c, { workflow_name: 'report', priority: 0, created_at: at(i) }));
        }
        const urgentLate = await insertTask(c, { workflow_name: 'alert', priority: 5, created_at: at(31) });
        const urgentEarly = await insertTask(c, { workflow_name: 'alert', priority: 5, created_at: at(30) });
        pendingByRank.push(urgentEarly, urgentLate, ...ordinary.slice(0, 8));
        // Higher priority than any pending task, but not pending.
        await insertTask(c, { workflow_name: 'alert', status: 'completed', priority: 9, created_at: at(0) });

        staleRunner = await insertTask(c, {
          workflow_name: 'order-processing',
          status: 'running',
          worker_id: 'worker-dead',
          heartbeat_at: new Date(Date.now() - 5 * 60_000),
        });
        freshRunner = await insertTask(c, {
          workflow_name: 'order-processing',
          status: 'running',
          worker_id: 'worker-1',
          heartbeat_at: new Date(),
        });
        // An old heartbeat on a task that is no longer running is not staleness.
        await insertTask(c, {
          workflow_name: 'order-processing',
          status: 'failed',
          heartbeat_at: new Date(Date.now() - 5 * 60_000),
        });

        // The memo of one task's 'validate-order', next to another step of that task and the same
        // step of other tasks, one of them still running it.
        orderTask = freshRunner;
        const completed = (taskId: string, stepKey: string, output: unknown) =>
          insertStep(c, { task_id: taskId, step_key: stepKey, status: 'completed', output });
        await completed(orderTask, 'validate-order', { valid: true });
        await completed(orderTask, 'charge-card', { charged: 10 });
        await completed(staleRunner, 'validate-order', { valid: false });
        inFlightTask = await insertTask(c, {
          workflow_name: 'order-processing',
          status: 'running',
          heartbeat_at: new Date(),
        });
        await insertStep(c, { task_id: inFlightTask, step_key: 'validate-order', status: 'running' });

        sagaTask = await insertTask(c, { workflow_name: 'book-trip', status: 'running', heartbeat_at: new Date() });
        const saga = (stepKey: string, status: string, compensationFn: string | null, completedMinute: number | null) =>
          insertStep(c, {
            task_id: sagaTask,
            step_key: stepKey,
            status,
            compensation_fn: compensationFn,
            completed_at: completedMinute === null ? null : at(completedMinute),
          });
        await saga('book-flight', 'completed', 'trip.cancelFlight', 1);
        await saga('send-email', 'completed', null, 2);
        await saga('book-hotel', 'completed', 'trip.cancelHotel', 3);
        await saga('book-car', 'completed', 'trip.cancelCar', 4);
        await saga('charge-card', 'failed', 'trip.refund', null);

        const dlq = (taskId: string, stepKey: string, message: string, minute: number) =>
          c.query(
            `INSERT INTO dead_letter_queue (task_id, step_id, error, created_at)
             SELECT task_id, id, $3, $4 FROM step_runs WHERE task_id = $1 AND step_key = $2`,
            [taskId, stepKey, { message }, at(minute)],
          );
        await dlq(sagaTask, 'book-hotel', 'hotel API down', 10);
        await dlq(sagaTask, 'book-car', 'car API down', 12);
        await dlq(orderTask, 'charge-card', 'refund rejected', 11);
        // A DLQ row whose task was purged: the seed's inner JOIN leaves it out.
        await c.query(
          `INSERT INTO dead_letter_queue (task_id, step_id, error, created_at)
           VALUES (gen_random_uuid(), gen_random_uuid(), '{"message":"orphan"}', $1)`,
          [at(13)],
        );
      });

      it('"Saga Rollback" finds the completed steps with a compensation, last completed first', async () => {
        const { rows } = await bed.db.client.query(forTask(FIND_COMPENSABLE_STEPS, sagaTask));
        expect(rows.map((r) => [r.step_key, r.compensation_fn])).toEqual([
          ['book-car', 'trip.cancelCar'],
          ['book-hotel', 'trip.cancelHotel'],
          ['book-flight', 'trip.cancelFlight'],
        ]);
        expect(rows.every((r) => r.task_id === sagaTask && r.status === 'completed')).toBe(true);
      });

      it('"Find pending tasks" returns ten pending tasks, by priority, then oldest first', async () => {
        const { rows } = await bed.db.client.query(FIND_PENDING_TASKS);
        expect(rows.map((r) => r.id)).toEqual(pendingByRank);
        expect(rows.every((r) => r.status === 'pending')).toBe(true);
        expect(rows.map((r) => r.priority)).toEqual([5, 5, 0, 0, 0, 0, 0, 0, 0, 0]);
      });

      it('"Find stale running tasks" returns only running tasks whose heartbeat is older than 30 seconds', async () => {
        const { rows } = await bed.db.client.query(FIND_STALE_RUNNING_TASKS);
        expect(rows.map((r) => [r.id, r.worker_id])).toEqual([[staleRunner, 'worker-dead']]);
        expect(rows.map((r) => r.id)).not.toContain(freshRunner);
      });

      it('"Check step memoization" returns the completed step of that task with its output', async () => {
        const { rows } = await bed.db.client.query(forTask(CHECK_STEP_MEMOIZATION, orderTask));
        expect(rows).toHaveLength(1);
        expect(rows[0]).toMatchObject({
          task_id: orderTask,
          step_key: 'validate-order',
          status: 'completed',
          output: { valid: true },
        });
      });

      it('"Check step memoization" returns nothing while the step has not completed', async () => {
        const { rows } = await bed.db.client.query(forTask(CHECK_STEP_MEMOIZATION, inFlightTask));
        expect(rows).toEqual([]);
      });

      it('"Find failed compensations" lists DLQ entries with their workflow name, newest first', async () => {
        const { rows } = await bed.db.client.query(FIND_FAILED_COMPENSATIONS);
        expect(rows.map((r) => [r.task_id, r.workflow_name, r.error.message])).toEqual([
          [sagaTask, 'book-trip', 'car API down'],
          [orderTask, 'order-processing', 'refund rejected'],
          [sagaTask, 'book-trip', 'hotel API down'],
        ]);
        expect(Object.keys(rows[0]).sort()).toEqual(
          ['created_at', 'error', 'id', 'retry_count', 'step_id', 'task_id', 'workflow_name'].sort(),
        );
        expect(rows[0].retry_count).toBe(0);
      });
    });
  });

  describe('migrations', () => {
    const scratchDatabase = () => bed.createDatabase({ migrate: false });
    /** Runs a command from the repository root, as a user would, against the database at `url`. */
    const runFromRepoRoot = (command: string, args: string[], url: string) =>
      execFileAsync(command, args, { cwd: REPO_ROOT, env: { ...process.env, DATABASE_URL: url } });

    it('applies nothing when run a second time', async () => {
      expect(await runDuraflowMigrations(bed.db.url)).toEqual([]);
      const { rows } = await bed.db.client.query('SELECT name FROM migrations ORDER BY timestamp');
      expect(rows.map((r) => r.name)).toEqual(MIGRATIONS);
    });

    // The seed runs this from apps/engine; in this repository the root holds src/db/migrate.ts.
    it(
      'creates the schema with the seed’s `npx tsx src/db/migrate.ts`, and does nothing the second time',
      async () => {
        const fresh = await scratchDatabase();
        expect(await publicTables(fresh.client)).toEqual([]);

        const first = await runFromRepoRoot('npx', ['tsx', 'src/db/migrate.ts'], fresh.url);
        expect(first.stdout).toContain(`Applied: ${MIGRATIONS.join(', ')}`);
        expect(await publicTables(fresh.client)).toEqual(TABLES);
        expect(await columnsOf(fresh.client, 'step_runs')).toEqual([...STEP_RUNS_SEED_COLUMNS, ...ENGINE_EXTRA_COLUMNS.step_runs]);

        const second = await runFromRepoRoot('npx', ['tsx', 'src/db/migrate.ts'], fresh.url);
        expect(second.stdout).toContain('Schema is up to date');
        expect(second.stdout).not.toContain('Applied');
      },
      CHILD_PROCESS_TIMEOUT_MS,
    );

    it(
      'creates the schema with `npm run migration:run`',
      async () => {
        const fresh = await scratchDatabase();
        const { stdout } = await runFromRepoRoot('npm', ['run', 'migration:run'], fresh.url);
        expect(stdout).toContain(`Applied: ${MIGRATIONS.join(', ')}`);
        expect(await publicTables(fresh.client)).toEqual(TABLES);
        expect(await columnsOf(fresh.client, 'agent_tasks')).toEqual([...AGENT_TASKS_SEED_COLUMNS, ...ENGINE_EXTRA_COLUMNS.agent_tasks]);
      },
      CHILD_PROCESS_TIMEOUT_MS,
    );

    it(
      'reports a failure and exits non-zero when the database is unreachable',
      async () => {
        const unreachable = 'postgres://postgres@127.0.0.1:1/duraflow_nowhere';
        await expect(runFromRepoRoot('npx', ['tsx', 'src/db/migrate.ts'], unreachable)).rejects.toMatchObject({
          code: 1,
          stderr: expect.stringContaining('Migration failed'),
        });
      },
      CHILD_PROCESS_TIMEOUT_MS,
    );
  });

  describe('TypeORM entities (DURAFLOW_ENTITIES)', () => {
    const entitiesBed = useTestBed();
    let dataSource: DataSource;

    beforeAll(async () => {
      dataSource = new DataSource({ type: 'postgres', url: entitiesBed.db.url, entities: DURAFLOW_ENTITIES });
      entitiesBed.closeLater(await dataSource.initialize(), (opened) => opened.destroy());
    });

    it('need no schema change against the migrated tables', async () => {
      const { upQueries } = await dataSource.driver.createSchemaBuilder().log();
      expect(upQueries.map((q) => q.query)).toEqual([]);
    });

    it('insert a task whose status, priority, retries, input and timestamps are database defaults', async () => {
      const tasks = dataSource.getRepository(AgentTask);
      const result = await tasks.insert({ workflowName: 'order-processing' });
      // What PostgreSQL returned for the columns TypeORM left to it (INSERT ... RETURNING).
      expect(result.generatedMaps[0]).toMatchObject({
        status: 'pending',
        priority: 0,
        retryCount: 0,
        maxRetries: 3,
        input: {},
      });
      const id = result.identifiers[0].id as string;
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);

      const task = await tasks.findOneOrFail({ where: { id, idempotencyKey: IsNull(), deletedAt: IsNull() } });
      expect(task).toMatchObject({
        id,
        workflowName: 'order-processing',
        status: 'pending',
        priority: 0,
        retryCount: 0,
        maxRetries: 3,
        input: {},
        output: null,
        error: null,
        scheduledAt: null,
        workerId: null,
        deletedAt: null,
        idempotencyKey: null,
      });
      expect(task.createdAt).toBeInstanceOf(Date);
      expect(task.updatedAt).toBeInstanceOf(Date);

      const { rows } = await entitiesBed.db.client.query(
        'SELECT status, priority, retry_count, max_retries, input FROM agent_tasks WHERE id = $1',
        [id],
      );
      expect(rows).toEqual([{ status: 'pending', priority: 0, retry_count: 0, max_retries: 3, input: {} }]);
    });

    it('insert and read back a step run, with its task through the relation', async () => {
      const task = await dataSource.getRepository(AgentTask).insert({ workflowName: 'book-trip' });
      const taskId = task.identifiers[0].id as string;
      const steps = dataSource.getRepository(StepRun);
      const completedAt = new Date('2024-01-01T10:00:00.000Z');
      await steps.insert({
        taskId,
        stepKey: 'book-flight',
        status: 'completed',
        output: { pnr: 'ABC123' },
        compensationFn: 'trip.cancelFlight',
        completedAt,
      });

      const step = await steps.findOneOrFail({
        where: { taskId, stepKey: 'book-flight', compensatedAt: IsNull() },
        relations: { task: true },
      });
      expect(step).toMatchObject({
        taskId,
        stepKey: 'book-flight',
        status: 'completed',
        output: { pnr: 'ABC123' },
        compensationFn: 'trip.cancelFlight',
        compensatedAt: null,
        completedAt,
        attempt: 0,
        input: null,
        error: null,
        completionSeq: null,
      });
      expect(step.id).toEqual(expect.any(String));
      expect(step.createdAt).toBeInstanceOf(Date);
      expect(step.task?.workflowName).toBe('book-trip');

      await steps.insert({ taskId, stepKey: 'send-email' });
      const pending = await steps.findOneOrFail({ where: { taskId, stepKey: 'send-email', completedAt: IsNull() } });
      expect(pending).toMatchObject({ status: 'pending', attempt: 0 });
    });

    it('insert and read back a dead letter', async () => {
      const letters = dataSource.getRepository(DeadLetter);
      const taskId = '00000000-0000-4000-8000-00000000000a';
      const stepId = '00000000-0000-4000-8000-00000000000b';
      const result = await letters.insert({ taskId, stepId, error: { message: 'refund rejected' } });
      expect(result.generatedMaps[0]).toMatchObject({ retryCount: 0 });

      const letter = await letters.findOneOrFail({ where: { taskId, stepId } });
      expect(letter).toMatchObject({ taskId, stepId, error: { message: 'refund rejected' }, retryCount: 0 });
      expect(letter.id).toEqual(result.identifiers[0].id);
      expect(letter.createdAt).toBeInstanceOf(Date);

      const otherStepId = '00000000-0000-4000-8000-00000000000c';
      const withoutError = await letters.insert({ taskId, stepId: otherStepId });
      const bare = await letters.findOneOrFail({ where: { id: withoutError.identifiers[0].id, error: IsNull() } });
      expect(bare).toMatchObject({ taskId, stepId: otherStepId, error: null, retryCount: 0 });

      // One open dead letter per step (idx_dlq_step_id): a second entry for a step is refused.
      await expect(letters.insert({ taskId, stepId })).rejects.toThrow(/idx_dlq_step_id/);
    });
  });
});
