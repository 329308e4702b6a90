import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { createEnvDatabase } from '../../libs/duraflow/src/testing/test-database';
import { DEFAULT_DATABASE_URL } from './shared-servers';

/**
 * The server tests create their databases on: DATABASE_URL, which the run's global setup sets to
 * its own embedded PostgreSQL when it is unset and nothing answers on the default's port.
 */
export const SERVER_URL = process.env.DATABASE_URL || DEFAULT_DATABASE_URL;

export interface TestDatabase {
  name: string;
  url: string;
  /** A plain client on the test database, for assertions and side-effect tables. */
  client: Client;
  drop(): Promise<void>;
}

/** The URL of database `name` on the server tests use (whether or not it exists). */
export function databaseUrl(name: string): string {
  const parsed = new URL(SERVER_URL);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

async function onServer<T>(fn: (client: Client) => Promise<T>): Promise<T> {
  const admin = new Client({ connectionString: SERVER_URL });
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.end();
  }
}

export interface TestDatabaseOptions {
  /** Run the migrations on it. Default true. */
  migrate?: boolean;
  /** Its name is `<prefix>_<random>`. Default 'duraflow_test'. */
  prefix?: string;
}

/**
 * A fresh database of its own, migrated, so test files run in parallel and start clean (the
 * bench makes its own the same way). Migrated, it is a clone of the testing kit's template for
 * the current migrations with the real clock (`createEnvDatabase`, the kit's own mechanism: the
 * migrations run once per server and version, not once per test); not migrated, an empty
 * database. If it cannot be migrated or connected to, it is dropped again.
 */
export async function createTestDatabase(options: TestDatabaseOptions = {}): Promise<TestDatabase> {
  if (options.migrate ?? true) return createEnvDatabase(options.prefix ?? 'duraflow_test', { virtualClock: false });
  const name = `${options.prefix ?? 'duraflow_test'}_${randomBytes(6).toString('hex')}`;
  await onServer((admin) => admin.query(`CREATE DATABASE ${name}`));
  const url = databaseUrl(name);
  let client: Client | undefined;
  const drop = async () => {
    await client?.end().catch(() => undefined);
    await onServer((admin) => admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
  };
  try {
    client = new Client({ connectionString: url });
    await client.connect();
  } catch (error) {
    await drop().catch(() => undefined);
    throw error;
  }
  return { name, url, client, drop };
}

/**
 * Ends PostgreSQL sessions with pg_terminate_backend, as a server restart or a cut connection
 * would, waiting up to `waitMs` for each to be gone; resolves with the pids it ended. A role may
 * end its own sessions; another role's take a superuser or a member of pg_signal_backend, and a
 * refusal says so (a test's only way to learn why it could not cause its outage).
 */
export async function terminateBackends(client: Client, pids: number[], waitMs = 0): Promise<number[]> {
  try {
    const { rows } = await client.query<{ pid: number }>('SELECT pid FROM unnest($1::int[]) AS pid WHERE pg_terminate_backend(pid, $2)', [
      pids,
      waitMs,
    ]);
    return rows.map((row) => row.pid);
  } catch (error) {
    if ((error as { code?: string }).code !== '42501') throw error;
    throw new Error(
      `This test ends PostgreSQL sessions with pg_terminate_backend, which the role of DATABASE_URL may not do here ` +
        `(${(error as Error).message}): run the tests as a superuser, or GRANT pg_signal_backend TO that role.`,
      { cause: error },
    );
  }
}
