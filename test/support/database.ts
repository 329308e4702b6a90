import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { runMigrations } from '../../src/db/migrate';
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

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
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
 * bench makes its own the same way). If it cannot be migrated or connected to, it is dropped again.
 */
export async function createTestDatabase(options: TestDatabaseOptions = {}): Promise<TestDatabase> {
  const name = `${options.prefix ?? 'duraflow_test'}_${randomBytes(6).toString('hex')}`;
  await onServer((admin) => admin.query(`CREATE DATABASE ${name}`));
  const url = withDatabase(SERVER_URL, name);
  let client: Client | undefined;
  const drop = async () => {
    await client?.end().catch(() => undefined);
    await onServer((admin) => admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
  };
  try {
    if (options.migrate ?? true) await runMigrations(url);
    client = new Client({ connectionString: url });
    await client.connect();
  } catch (error) {
    await drop().catch(() => undefined);
    throw error;
  }
  return { name, url, client, drop };
}
