import { Client } from 'pg';
import { createTestDatabase } from '../test/support/database';

/**
 * The bench's own database on the server the tests use (DATABASE_URL), made like a test's
 * (test/support/database.ts), migrated, dropped at the end.
 */
export interface BenchDatabase {
  name: string;
  url: string;
  /** A plain client on the bench database: bulk inserts, truncates, progress queries. */
  client: Client;
  /** Empties the three Duraflow tables, so a scenario starts on an empty queue. */
  truncate(): Promise<void>;
  /** Inserts `count` pending tasks with one SQL statement (created_at 1 µs apart, so the claim order is total). */
  insertPending(workflowName: string, input: object, count: number): Promise<void>;
  /** What the statistics of agent_tasks say now (see `TableStatistics`). */
  statistics(): Promise<TableStatistics>;
  drop(): Promise<void>;
}

export interface TableStatistics {
  /** The table has statistics: column statistics, or a row count from ANALYZE or VACUUM. */
  gathered: boolean;
  /** The rows the planner expects for `status = 'pending'`. */
  plannerPending: number;
  /** Both, in words, for a note. */
  note: string;
}

export async function createBenchDatabase(): Promise<BenchDatabase> {
  const database = await createTestDatabase({ prefix: 'duraflow_bench' });
  const db = database.client;
  return {
    ...database,
    truncate: async () => {
      await db.query('TRUNCATE agent_tasks, step_runs, dead_letter_queue');
    },
    insertPending: async (workflowName, input, count) => {
      await db.query(
        `INSERT INTO agent_tasks (workflow_name, input, created_at, updated_at)
         SELECT $1, $2::jsonb, now() + g * interval '1 microsecond', now()
         FROM generate_series(1, $3::int) AS g`,
        [workflowName, JSON.stringify(input), count],
      );
    },
    statistics: async () => {
      const { rows } = await db.query<{ gathered: boolean }>(
        `SELECT EXISTS (SELECT 1 FROM pg_stats WHERE schemaname = current_schema() AND tablename = 'agent_tasks')
                OR (SELECT reltuples >= 0 FROM pg_class WHERE oid = 'agent_tasks'::regclass) AS gathered`,
      );
      const estimate = await db.query(`EXPLAIN (FORMAT JSON) SELECT 1 FROM agent_tasks WHERE status = 'pending'`);
      const plannerPending = Math.round(estimate.rows[0]['QUERY PLAN'][0].Plan['Plan Rows']);
      const { gathered } = rows[0];
      return {
        gathered,
        plannerPending,
        note: `${gathered ? 'analyzed' : 'statistics never gathered'}, the planner expects ${plannerPending} pending`,
      };
    },
  };
}
