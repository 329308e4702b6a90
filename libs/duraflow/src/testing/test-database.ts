import { createHash, randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { DURAFLOW_MIGRATIONS } from '../migrations';
import { runDuraflowMigrations } from '../migrations/run-migrations';

/** Where test databases are created when DATABASE_URL is unset (and the global setup found nothing else). */
export const DEFAULT_TEST_SERVER_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * The virtual clock in SQL: the engine's `duraflow_now()` and `duraflow_clock_timestamp()`
 * (migrations/1700000006000-EngineClock.ts) redefined in the test database to add the offset
 * its one-row table holds, which the test environment moves with its VirtualClock; and the
 * stamps the engine later ages by that clock written by it.
 */
const VIRTUAL_CLOCK_SQL = [
  `CREATE TABLE duraflow_test_clock (offset_ms bigint NOT NULL)`,
  `INSERT INTO duraflow_test_clock (offset_ms) VALUES (0)`,
  `CREATE OR REPLACE FUNCTION duraflow_now() RETURNS timestamptz LANGUAGE sql STABLE
     AS $$ SELECT now() + (SELECT offset_ms FROM duraflow_test_clock) * interval '1 millisecond' $$`,
  `CREATE OR REPLACE FUNCTION duraflow_clock_timestamp() RETURNS timestamptz LANGUAGE sql VOLATILE
     AS $$ SELECT clock_timestamp() + (SELECT offset_ms FROM duraflow_test_clock) * interval '1 millisecond' $$`,
  // A published event's age (its retention) is counted on the engine's clock: stamped by it too,
  // whether published from Node or from SQL (duraflow_publish, the engine's own events).
  `ALTER TABLE duraflow_published_events ALTER COLUMN created_at SET DEFAULT duraflow_now()`,
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

/** The prefix of the template databases (one per set of migrations) that environments are cloned from. */
export const TEMPLATE_PREFIX = 'duraflow_env_tpl_';
/** The hex digits of a template's version (a hash of the migrations and the clock's SQL) after the prefix. */
const VERSION_LENGTH = 16;

/** PostgreSQL's "database is being accessed by other users" (a template another session still reads). */
const OBJECT_IN_USE = '55006';
/** PostgreSQL's "database does not exist". */
const INVALID_CATALOG_NAME = '3D000';

/**
 * A fresh database on the test server, migrated, with the virtual clock installed (unless
 * `virtualClock: false`: the engine's real clock, as a database migrated for production has
 * it): a clone of the template for the current migrations and clock (`CREATE DATABASE ...
 * TEMPLATE`, a file copy), which the first environment on the server builds. Dropped again if
 * that fails.
 */
export async function createEnvDatabase(prefix = 'duraflow_env', options: { virtualClock?: boolean } = {}): Promise<EnvDatabase> {
  const server = testServerUrl();
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const clockSql = options.virtualClock === false ? [] : VIRTUAL_CLOCK_SQL;
  for (let tries = 0; ; tries++) {
    const template = await ensureTemplate(server, clockSql);
    try {
      await onServer(server, (admin) => cloneWhenFree(admin, template, name));
      break;
    } catch (error) {
      // The template went away (another run's teardown dropped it): built again, once.
      if ((error as { code?: string }).code !== INVALID_CATALOG_NAME || tries >= 1) throw error;
    }
  }
  const url = databaseOn(server, name);
  const client = new Client({ connectionString: url });
  let connected = false;
  const drop = async () => {
    if (connected) await client.end().catch(() => undefined);
    connected = false;
    await onServer(server, (admin) => admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
  };
  try {
    await client.connect();
    connected = true;
  } catch (error) {
    await drop().catch(() => undefined);
    throw error;
  }
  return { name, url, client, drop };
}

/**
 * Drops the template databases environments were cloned from (the global teardown's last step):
 * the finished ones only, `duraflow_env_tpl_<version>`; one still being built under its longer
 * name is another run's, which drops it itself if it fails.
 */
export async function dropEnvTemplates(server = testServerUrl()): Promise<void> {
  await onServer(server, async (admin) => {
    const { rows } = await admin.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE datname ~ $1`, [
      `^${TEMPLATE_PREFIX}[0-9a-f]{${VERSION_LENGTH}}$`,
    ]);
    for (const { datname } of rows) {
      await admin.query(`ALTER DATABASE ${datname} IS_TEMPLATE false`).catch(() => undefined);
      await admin.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`).catch(() => undefined);
    }
  });
}

/** The template for this version's migrations and clock, built (migrated under another name, then renamed) if the server has none. */
async function ensureTemplate(server: string, clockSql: string[]): Promise<string> {
  const version = createHash('sha256')
    // Each migration's name and its code (its SQL), so a migration changed in place makes a new template.
    .update(
      [
        ...DURAFLOW_MIGRATIONS.map((migration) => `${migration.name}\n${String(migration.prototype.up)}`),
        clockSql.length ? 'virtual clock' : 'real clock',
        ...clockSql,
      ].join('\n'),
    )
    .digest('hex')
    .slice(0, VERSION_LENGTH);
  const template = `${TEMPLATE_PREFIX}${version}`;
  const exists = await onServer(server, async (admin) => {
    const { rows } = await admin.query(`SELECT 1 FROM pg_database WHERE datname = $1`, [template]);
    return rows.length > 0;
  });
  if (exists) return template;
  const building = `${template}_${randomBytes(4).toString('hex')}`;
  await onServer(server, (admin) => admin.query(`CREATE DATABASE ${building}`));
  try {
    await runDuraflowMigrations(databaseOn(server, building));
    const client = new Client({ connectionString: databaseOn(server, building) });
    await client.connect();
    try {
      for (const statement of clockSql) await client.query(statement);
    } finally {
      await client.end();
    }
    // Another process may have built it meanwhile: theirs stays, this one goes.
    await onServer(server, (admin) => admin.query(`ALTER DATABASE ${building} RENAME TO ${template}`)).catch(() => undefined);
  } finally {
    await onServer(server, (admin) => admin.query(`DROP DATABASE IF EXISTS ${building} WITH (FORCE)`)).catch(() => undefined);
  }
  return template;
}

/** CREATE DATABASE from the template, tried again while another session still reads the template (a clone under way). */
async function cloneWhenFree(admin: Client, template: string, name: string): Promise<void> {
  for (let tries = 0; ; tries++) {
    try {
      await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
      return;
    } catch (error) {
      if ((error as { code?: string }).code !== OBJECT_IN_USE || tries >= 100) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20 + Math.random() * 80));
    }
  }
}

function databaseOn(server: string, name: string): string {
  const parsed = new URL(server);
  parsed.pathname = `/${name}`;
  return parsed.toString();
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
