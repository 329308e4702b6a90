import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Redis from 'ioredis';
import { Client } from 'pg';
import type { ServersReport } from './fixtures/test-servers/servers.case';
import { freePort } from './support/ports';
import { eventually } from './support/waiting';
import { SERVER_URL, terminateBackends } from './support/database';
import { SHARED_REDIS_URL } from './support/redis-server';
import { isAlive } from './support/process-alive';
import { answers, startTestServers, TestServers, TestServersError } from './support/test-servers';

/**
 * The run's PostgreSQL and Redis (jest.config.js globalSetup/globalTeardown): the given or shared
 * ones, else private ones that never outlive the run. Here "nothing answers" is a free port, or
 * DURAFLOW_TEST_SERVERS=private for a whole Jest run, whatever answers on this machine.
 */

// Each private start runs initdb, and each Jest run of its own boots Jest: room for a loaded 2-core machine.
jest.setTimeout(90_000);

const ROOT = path.join(__dirname, '..');
const JEST_BIN = require.resolve('jest/bin/jest');
const CASE_CONFIG = path.join(__dirname, 'fixtures', 'test-servers', 'jest.config.js');

/** This process's environment as a fresh shell has it: no servers chosen yet. */
function freshEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const { DATABASE_URL, REDIS_URL, JEST_WORKER_ID, ...env } = process.env;
  return { ...env, ...extra };
}

describe('startTestServers', () => {
  let servers: TestServers | undefined;
  /** Where nothing answers: a port that was free a moment ago. */
  let nowhere: { DATABASE_URL: string; REDIS_URL: string };

  beforeEach(async () => {
    nowhere = {
      DATABASE_URL: `postgres://postgres@127.0.0.1:${await freePort()}/postgres`,
      REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
    };
  });

  afterEach(async () => {
    await servers?.stop();
    servers = undefined;
  });

  it('uses DATABASE_URL and REDIS_URL when they are set, even with DURAFLOW_TEST_SERVERS=private, and starts nothing', async () => {
    const env = { DATABASE_URL: SERVER_URL, REDIS_URL: SHARED_REDIS_URL, DURAFLOW_TEST_SERVERS: 'private', PATH: '' };
    servers = await startTestServers({ env, defaults: nowhere });
    expect(servers.env).toEqual({ DATABASE_URL: SERVER_URL, REDIS_URL: SHARED_REDIS_URL });
    expect(servers.started).toBeUndefined();
    expect(servers.dir).toBeUndefined();
  });

  it('uses the servers that answer where DATABASE_URL and REDIS_URL default to, and starts nothing', async () => {
    const defaults = { DATABASE_URL: SERVER_URL, REDIS_URL: SHARED_REDIS_URL };
    servers = await startTestServers({ env: { PATH: '' }, defaults });
    expect(servers.env).toEqual(defaults);
    expect(servers.started).toBeUndefined();
  });

  it('starts an embedded PostgreSQL and a redis-server of its own when nothing answers there, where a test creates its database as a superuser, and stop() leaves nothing behind', async () => {
    servers = await startTestServers({ env: freshEnv(), defaults: nowhere });
    const { DATABASE_URL: databaseUrl, REDIS_URL: redisUrl } = servers.env;
    const dir = servers.dir!;
    expect(servers.started).toMatch(
      /^Test servers: an embedded PostgreSQL on 127\.0\.0\.1:\d+ and a redis-server on 127\.0\.0\.1:\d+, started for this run in /,
    );
    expect(servers.started).toContain(dir);
    expect(existsSync(dir)).toBe(true);

    const client = new Client({ connectionString: databaseUrl });
    await client.connect();
    const { rows } = await client.query<{ rolsuper: boolean }>('SELECT rolsuper FROM pg_roles WHERE rolname = current_user');
    expect(rows).toEqual([{ rolsuper: true }]);
    await client.query('CREATE DATABASE duraflow_test_servers_check');
    await client.end();
    const redis = new Redis(redisUrl);
    expect(await redis.ping()).toBe('PONG');
    redis.disconnect();

    await servers.stop();
    servers = undefined;
    expect(await answers(databaseUrl)).toBe(false);
    expect(await answers(redisUrl)).toBe(false);
    expect(existsSync(dir)).toBe(false);
  });

  it('refuses in one line naming what to install when no Redis answers and redis-server is not on the PATH, and pgbench when the run needs it', async () => {
    const emptyDir = mkdtempSync(path.join(tmpdir(), 'duraflow-empty-path-'));
    try {
      const env = { ...freshEnv(), PATH: emptyDir };
      const redisOnly = await startTestServers({ env, defaults: nowhere }).catch((error: unknown) => error);
      expect(redisOnly).toBeInstanceOf(TestServersError);
      const message = (redisOnly as Error).message;
      expect(message).not.toContain('\n');
      expect(message).toBe(
        `The tests need redis-server, which is not on the PATH: redis-server would start a Redis of their own, as nothing answers on ` +
          `${new URL(nowhere.REDIS_URL).host} and REDIS_URL is unset (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis).`,
      );

      const both = await startTestServers({ env, defaults: nowhere, needsPgbench: true }).catch((error: unknown) => error);
      expect((both as Error).message).not.toContain('\n');
      expect((both as Error).message).toMatch(
        /^The tests need redis-server and pgbench, which are not on the PATH: redis-server would .*\); pgbench measures the quick benchmark's reference figures \(Debian\/Ubuntu: apt-get install postgresql-contrib; macOS: brew install postgresql@17\)\.$/,
      );
    } finally {
      rmSync(emptyDir, { recursive: true, force: true });
    }
  });

  it('says which server refuses the tests and what to set', async () => {
    const url = new URL(SERVER_URL);
    url.username = 'duraflow_no_such_role';
    url.password = 'wrong';
    const refused = await startTestServers({ env: { DATABASE_URL: url.toString(), REDIS_URL: SHARED_REDIS_URL } }).catch(
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(TestServersError);
    expect((refused as Error).message).toMatch(
      /^The tests cannot use PostgreSQL at postgres:\/\/duraflow_no_such_role:\*\*\*@.*: .*duraflow_no_such_role.*\. Set DATABASE_URL to a server where its user may create databases\.$/,
    );

    const noRedis = await startTestServers({ env: { DATABASE_URL: SERVER_URL, REDIS_URL: nowhere.REDIS_URL } }).catch(
      (error: unknown) => error,
    );
    expect(noRedis).toBeInstanceOf(TestServersError);
    expect((noRedis as Error).message).toMatch(
      /^The tests cannot use Redis at redis:\/\/127\.0\.0\.1:\d+: .+\. Set REDIS_URL to a Redis they may write keys to\.$/,
    );
  });
});

describe('a Jest run on private servers', () => {
  let jestRun: ChildProcess | undefined;
  let output = '';
  let workDir: string;

  beforeEach(() => {
    workDir = mkdtempSync(path.join(tmpdir(), 'duraflow-servers-case-'));
    output = '';
  });

  afterEach(() => {
    if (jestRun?.exitCode === null && jestRun.signalCode === null) process.kill(-jestRun.pid!, 'SIGKILL');
    jestRun = undefined;
    rmSync(workDir, { recursive: true, force: true });
  });

  /** `jest` over test/fixtures/test-servers in a process group of its own, as a terminal runs it. */
  function startJest(
    mode: 'fail' | 'wait',
    env: Record<string, string> = {},
  ): { exited: Promise<number | null>; report: () => Promise<ServersReport> } {
    const reportFile = path.join(workDir, 'servers.json');
    jestRun = spawn(process.execPath, [JEST_BIN, '--config', CASE_CONFIG], {
      cwd: ROOT,
      env: freshEnv({ DURAFLOW_TEST_SERVERS: 'private', SERVERS_CASE: mode, SERVERS_REPORT: reportFile, NO_COLOR: '1', ...env }),
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const child = jestRun;
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const report = async () => {
      await eventually('the case reports its servers', () => existsSync(reportFile) || child.exitCode !== null, { timeoutMs: 60_000 });
      if (!existsSync(reportFile)) throw new Error(`The Jest run ended before its case ran:\n${output}`);
      return JSON.parse(readFileSync(reportFile, 'utf8')) as ServersReport;
    };
    return { exited, report };
  }

  /** Nothing of the servers is left: no process, no port, no file. */
  async function gone(report: ServersReport): Promise<boolean> {
    return (
      !isAlive(report.postmasterPid) &&
      !isAlive(report.redisPid) &&
      !existsSync(path.dirname(report.clusterDir)) &&
      !existsSync(report.redisDir) &&
      !(await answers(report.databaseUrl)) &&
      !(await answers(report.redisUrl))
    );
  }

  it('gives its tests and their child processes DATABASE_URL and REDIS_URL of the servers it started, and stops them after a failed run', async () => {
    const run = startJest('fail');
    const report = await run.report();
    expect(isAlive(report.postmasterPid)).toBe(true);
    expect(isAlive(report.redisPid)).toBe(true);
    expect(new URL(report.databaseUrl).port).not.toBe('5432');
    expect(new URL(report.redisUrl).port).not.toBe('6379');
    expect(report.childEnv).toBe(`${report.databaseUrl} ${report.redisUrl}`);
    expect(report.clusterDir.startsWith(path.join(tmpdir(), 'duraflow-test-servers-'))).toBe(true);
    expect(await run.exited).toBe(1);
    expect(output).toContain('failing on purpose');
    expect(output).toMatch(/Test servers: an embedded PostgreSQL on 127\.0\.0\.1:\d+ and a redis-server on 127\.0\.0\.1:\d+/);
    // The teardown has waited for them: gone as Jest exits.
    expect(await gone(report)).toBe(true);
  });

  it('stops before any test with one line when redis-server is not on the PATH', async () => {
    const run = startJest('fail', { PATH: workDir });
    expect(await run.exited).toBe(1);
    expect(output.trim()).toMatch(/^The tests need redis-server, which is not on the PATH: .*brew install redis\)\.$/);
    expect(existsSync(path.join(workDir, 'servers.json'))).toBe(false);
  });

  it.each([
    ['Ctrl-C (SIGINT to its process group)', 'SIGINT', true],
    ['SIGTERM', 'SIGTERM', false],
    ['SIGKILL', 'SIGKILL', false],
  ] as const)('stops them when Jest is stopped by %s in the middle of a test', async (_, signal, group) => {
    const run = startJest('wait');
    const report = await run.report();
    expect(await answers(report.databaseUrl)).toBe(true);
    process.kill(group ? -jestRun!.pid! : jestRun!.pid!, signal);
    await run.exited;
    await eventually('the servers are stopped and their files removed', () => gone(report), { timeoutMs: 30_000 });
  });
});

describe('terminateBackends, which the outage tests cause their outages with', () => {
  // On a server of its own: creating a role takes a right the role of DATABASE_URL need not have.
  let servers: TestServers;

  beforeAll(async () => {
    const nowhere = `postgres://postgres@127.0.0.1:${await freePort()}/postgres`;
    servers = await startTestServers({
      env: freshEnv({ REDIS_URL: SHARED_REDIS_URL }),
      defaults: { DATABASE_URL: nowhere, REDIS_URL: SHARED_REDIS_URL },
    });
  });

  afterAll(() => servers?.stop());

  it("ends the sessions it is given, and says what the role lacks when it may not end another role's", async () => {
    const superuserUrl = servers.env.DATABASE_URL;
    const admin = new Client({ connectionString: superuserUrl });
    await admin.connect();
    const role = `duraflow_test_role_${randomBytes(4).toString('hex')}`;
    const password = randomBytes(12).toString('hex');
    await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`);
    const limitedUrl = new URL(superuserUrl);
    limitedUrl.username = role;
    limitedUrl.password = password;
    const limited = new Client({ connectionString: limitedUrl.toString() });
    const victim = new Client({ connectionString: superuserUrl });
    victim.on('error', () => undefined);
    try {
      await limited.connect();
      await victim.connect();
      const { rows } = await victim.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const pid = rows[0].pid;

      await expect(terminateBackends(limited, [pid])).rejects.toThrow(
        /^This test ends PostgreSQL sessions with pg_terminate_backend, which the role of DATABASE_URL may not do here \(.+\): run the tests as a superuser, or GRANT pg_signal_backend TO that role\.$/,
      );
      expect(await terminateBackends(admin, [pid], 5_000)).toEqual([pid]);
      await expect(victim.query('SELECT 1')).rejects.toThrow();
    } finally {
      await limited.end().catch(() => undefined);
      await victim.end().catch(() => undefined);
      await admin.end();
    }
  });
});
