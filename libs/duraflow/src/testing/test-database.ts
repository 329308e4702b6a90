import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { runDuraflowMigrations } from '../migrations/run-migrations';

/** Where test databases are created when DATABASE_URL is unset (and the global setup found nothing else). */
export const DEFAULT_TEST_SERVER_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * The virtual clock in SQL: the engine's `duraflow_now()` and `duraflow_clock_timestamp()`
 * (migrations/1700000006000-EngineClock.ts) redefined in the test database to add the offset
 * its one-row table holds, which the test environment moves with its VirtualClock.
 */
const VIRTUAL_CLOCK_SQL = [
  `CREATE TABLE duraflow_test_clock (offset_ms bigint NOT NULL)`,
  `INSERT INTO duraflow_test_clock (offset_ms) VALUES (0)`,
  `CREATE OR REPLACE FUNCTION duraflow_now() RETURNS timestamptz LANGUAGE sql STABLE
     AS $$ SELECT now() + (SELECT offset_ms FROM duraflow_test_clock) * interval '1 millisecond' $$`,
  `CREATE OR REPLACE FUNCTION duraflow_clock_timestamp() RETURNS timestamptz LANGUAGE sql VOLATILE
     AS $$ SELECT clock_timestamp() + (SELECT offset_ms FROM duraflow_test_clock) * interval '1 millisecond' $$`,
];

/** A database of one test environment: created, migrated, its clock virtual; dropped by `drop()`. */
export interface EnvDatabase {
  name: string;
  url: string;
  /** A session of the environment's own (reads past the library, the clock's writes). */
  client: Client;
  drop(): Promise<void>;
}

/** The server test environments create their databases on. */
export function testServerUrl(): string {
  return process.env.DATABASE_URL || DEFAULT_TEST_SERVER_URL;
}

/** A fresh database on the test server, migrated, with the virtual clock installed. Dropped again if that fails. */
export async function createEnvDatabase(prefix = 'duraflow_env'): Promise<EnvDatabase> {
  const server = testServerUrl();
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  await onServer(server, (admin) => admin.query(`CREATE DATABASE ${name}`));
  const parsed = new URL(server);
  parsed.pathname = `/${name}`;
  const url = parsed.toString();
  const client = new Client({ connectionString: url });
  let connected = false;
  const drop = async () => {
    if (connected) await client.end().catch(() => undefined);
    connected = false;
    await onServer(server, (admin) => admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
  };
  try {
    await runDuraflowMigrations(url);
    await client.connect();
    connected = true;
    for (const statement of VIRTUAL_CLOCK_SQL) await client.query(statement);
  } catch (error) {
    await drop().catch(() => undefined);
    throw error;
  }
  return { name, url, client, drop };
}

async function onServer<T>(url: string, fn: (client: Client) => Promise<T>): Promise<T> {
  const admin = new Client({ connectionString: url });
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.end();
  }
}
