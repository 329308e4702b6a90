import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { runMigrations } from '../src/db/migrate';
import { SERVER_URL } from '../test/support/database';

/** The bench's own database on the server the tests use (DATABASE_URL), migrated, dropped at the end. */
export interface BenchDatabase {
  name: string;
  url: string;
  /** A plain client on the bench database: bulk inserts, truncates, progress queries. */
  client: Client;
  /** Empties the three Duraflow tables, so a scenario starts on an empty queue. */
  truncate(): Promise<void>;
  /** Inserts `count` pending tasks with one SQL statement (created_at 1 µs apart, so the claim order is total). */
  insertPending(workflowName: string, input: object, count: number): Promise<void>;
  drop(): Promise<void>;
}

export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

async function onServer<T>(fn: (admin: Client) => Promise<T>): Promise<T> {
  const admin = new Client({ connectionString: SERVER_URL });
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.end();
  }
}

export async function createBenchDatabase(): Promise<BenchDatabase> {
  const name = `duraflow_bench_${randomBytes(6).toString('hex')}`;
  await onServer((admin) => admin.query(`CREATE DATABASE ${name}`));
  const url = withDatabase(SERVER_URL, name);
  let client: Client | undefined;
  const drop = async () => {
    await client?.end().catch(() => undefined);
    await onServer((admin) => admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
  };
  try {
    await runMigrations(url);
    client = new Client({ connectionString: url });
    await client.connect();
  } catch (error) {
    await drop().catch(() => undefined);
    throw error;
  }
  const db: Client = client;
  return {
    name,
    url,
    client: db,
    drop,
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
  };
}
