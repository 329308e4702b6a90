import { ChildProcess, fork } from 'node:child_process';
import { accessSync, constants as fsConstants, statSync } from 'node:fs';
import { connect } from 'node:net';
import path from 'node:path';
import Redis from 'ioredis';
import { Client } from 'pg';
import { redactPassword } from '../../src/config/redact-password';
import { SWC_REGISTER } from './typescript-node';
import { DEFAULT_DATABASE_URL, DEFAULT_REDIS_URL } from './shared-servers';
import type { TestServersMessage } from './test-servers-main';

const ENTRY = path.join(__dirname, 'test-servers-main.ts');
/** How long a connection attempt to a default port may take before nothing is said to answer there. */
const PROBE_TIMEOUT_MS = 1_000;
/** initdb and the first start on a loaded machine, then redis-server. */
const START_TIMEOUT_MS = 120_000;
const STOP_TIMEOUT_MS = 60_000;

/** A reason the run cannot start, in one line that says what to do. */
export class TestServersError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TestServersError';
  }
}

/** A program the run needs on the PATH, and how to install it. */
interface Tool {
  command: string;
  why: string;
  install: string;
}

const INSTALL_REDIS = 'Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis';
const PGBENCH: Tool = {
  command: 'pgbench',
  why: "measures the quick benchmark's reference figures",
  install: 'Debian/Ubuntu: apt-get install postgresql-contrib; macOS: brew install postgresql@17',
};

export interface TestServersOptions {
  /** Default process.env: DATABASE_URL, REDIS_URL, DURAFLOW_TEST_SERVERS, PATH, REDIS_SERVER_BIN. */
  env?: NodeJS.ProcessEnv;
  /** The run includes the quick benchmark, which runs pgbench. */
  needsPgbench?: boolean;
  /** Where to look for servers when DATABASE_URL / REDIS_URL are unset. Default shared-servers.ts. */
  defaults?: { DATABASE_URL: string; REDIS_URL: string };
}

export interface TestServers {
  /** The servers the run uses, for its workers and every process they start. */
  env: { DATABASE_URL: string; REDIS_URL: string };
  /** What was started for the run, in one line; undefined when it uses servers that were there. */
  started: string | undefined;
  /** The directory the private servers keep their files in (removed by `stop()`). */
  dir: string | undefined;
  /** Stops what was started and removes its files; resolves once they are gone. */
  stop(): Promise<void>;
}

/**
 * The PostgreSQL and Redis of a test run. DATABASE_URL / REDIS_URL when set; else the servers
 * on the default ports when something answers there; else private ones started for the run,
 * in a process of their own (test-servers-main.ts) that also stops them if this process dies
 * without calling `stop()`. `DURAFLOW_TEST_SERVERS=private` starts the private ones even when
 * the default ports answer. Throws TestServersError, before starting anything, when a program
 * the run needs is missing, or when a server it would use refuses it.
 */
export async function startTestServers(options: TestServersOptions = {}): Promise<TestServers> {
  const env = options.env ?? process.env;
  const defaults = options.defaults ?? { DATABASE_URL: DEFAULT_DATABASE_URL, REDIS_URL: DEFAULT_REDIS_URL };
  const mode = env.DURAFLOW_TEST_SERVERS || 'auto';
  if (mode !== 'auto' && mode !== 'private') {
    throw new TestServersError(`DURAFLOW_TEST_SERVERS="${mode}" is invalid: use "auto" (the default) or "private".`);
  }
  const ownPostgres = !env.DATABASE_URL && (mode === 'private' || !(await answers(defaults.DATABASE_URL)));
  const ownRedis = !env.REDIS_URL && (mode === 'private' || !(await answers(defaults.REDIS_URL)));

  const needed: Tool[] = [];
  if (ownRedis) {
    const why = `would start a Redis of their own, as nothing answers on ${hostPort(defaults.REDIS_URL)} and REDIS_URL is unset`;
    // REDIS_SERVER_BIN: the binary RedisServer starts (redis-server.ts).
    needed.push({ command: env.REDIS_SERVER_BIN || 'redis-server', why, install: INSTALL_REDIS });
  }
  if (options.needsPgbench) needed.push(PGBENCH);
  const missing = needed.filter((tool) => !onPath(tool.command, env));
  if (missing.length) throw new TestServersError(missingToolsMessage(missing));

  let servers: PrivateServers | undefined;
  if (ownPostgres || ownRedis) servers = await PrivateServers.start({ postgres: ownPostgres, redis: ownRedis, env });
  const chosen = {
    DATABASE_URL: servers?.databaseUrl ?? env.DATABASE_URL ?? defaults.DATABASE_URL,
    REDIS_URL: servers?.redisUrl ?? env.REDIS_URL ?? defaults.REDIS_URL,
  };
  try {
    await checkPostgres(chosen.DATABASE_URL, !env.DATABASE_URL && !ownPostgres);
    await checkRedis(chosen.REDIS_URL, !env.REDIS_URL && !ownRedis);
  } catch (error) {
    await servers?.stop();
    throw error;
  }
  return { env: chosen, started: servers?.describe(), dir: servers?.dir, stop: async () => servers?.stop() };
}

/** The forked process that owns the private servers, and the URLs it reported. */
class PrivateServers {
  private constructor(
    private readonly child: ChildProcess,
    readonly databaseUrl: string | undefined,
    readonly redisUrl: string | undefined,
    readonly dir: string,
  ) {}

  static async start(what: { postgres: boolean; redis: boolean; env: NodeJS.ProcessEnv }): Promise<PrivateServers> {
    const child = fork(ENTRY, [...(what.postgres ? ['postgres'] : []), ...(what.redis ? ['redis'] : [])], {
      execArgv: ['-r', SWC_REGISTER],
      env: what.env,
      // A session of its own: a Ctrl-C in the terminal reaches the run, not it (it hears of it from the channel).
      detached: true,
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    const ready = await new Promise<Extract<TestServersMessage, { type: 'ready' }>>((resolve, reject) => {
      const timer = setTimeout(() => fail(`they did not start within ${START_TIMEOUT_MS / 1000} s`), START_TIMEOUT_MS);
      const onMessage = (message: TestServersMessage) => {
        if (message.type === 'failed') return fail(message.message);
        settle();
        resolve(message);
      };
      const onExit = (code: number | null, signal: NodeJS.Signals | null) => fail(`their process exited (${signal ?? `code ${code}`})`);
      const onError = (error: Error) => fail(error.message);
      const settle = () => {
        clearTimeout(timer);
        child.off('message', onMessage).off('exit', onExit).off('error', onError);
      };
      // It removes what it started once the channel closes.
      const fail = (reason: string) => {
        settle();
        if (child.connected) child.disconnect();
        reject(new TestServersError(`The test run could not start its own servers: ${reason}`));
      };
      child.on('message', onMessage).once('exit', onExit).once('error', onError);
    });
    // The run's other work decides when this process may exit, not the channel: stop() takes them back.
    child.unref();
    child.channel?.unref();
    return new PrivateServers(child, ready.databaseUrl, ready.redisUrl, ready.dir);
  }

  describe(): string {
    const what = [
      this.databaseUrl && `an embedded PostgreSQL on ${hostPort(this.databaseUrl)}`,
      this.redisUrl && `a redis-server on ${hostPort(this.redisUrl)}`,
    ].filter(Boolean);
    return `Test servers: ${what.join(' and ')}, started for this run in ${this.dir} (stopped and removed when it ends)`;
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.ref();
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    if (child.connected) child.disconnect();
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([
      exited,
      new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), STOP_TIMEOUT_MS))),
    ]);
    clearTimeout(timer);
    if (code === 'timeout') {
      // Left to finish on its own (killing it would orphan the servers); the run need not wait for it.
      child.unref();
      throw new TestServersError(
        `The test run's servers did not stop within ${STOP_TIMEOUT_MS / 1000} s: their process ${child.pid} still holds ${this.dir}`,
      );
    }
    if (code !== 0) throw new TestServersError(`Stopping the test run's servers failed (exit code ${code}; see the lines above)`);
  }
}

/** Something accepts a TCP connection on the URL's host and port. */
export function answers(url: string, timeoutMs = PROBE_TIMEOUT_MS): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port) });
    const settle = (answered: boolean) => {
      socket.destroy();
      resolve(answered);
    };
    socket.setTimeout(timeoutMs, () => settle(false));
    socket.once('connect', () => settle(true));
    socket.once('error', () => settle(false));
  });
}

/** The command is a path to an executable file, or the name of one in a PATH directory. */
function onPath(command: string, env: NodeJS.ProcessEnv): boolean {
  const candidates = command.includes(path.sep)
    ? [command]
    : (env.PATH ?? '')
        .split(path.delimiter)
        .filter(Boolean)
        .map((dir) => path.join(dir, command));
  return candidates.some((file) => {
    try {
      accessSync(file, fsConstants.X_OK);
      return statSync(file).isFile();
    } catch {
      return false;
    }
  });
}

function missingToolsMessage(missing: Tool[]): string {
  const names = missing.map((tool) => tool.command);
  const head =
    names.length === 1
      ? `The tests need ${names[0]}, which is not on the PATH`
      : `The tests need ${names.slice(0, -1).join(', ')} and ${names.at(-1)}, which are not on the PATH`;
  return `${head}: ${missing.map((tool) => `${tool.command} ${tool.why} (${tool.install})`).join('; ')}.`;
}

async function checkPostgres(url: string, isDefault: boolean): Promise<void> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (error) {
    throw new TestServersError(
      `The tests cannot use PostgreSQL at ${redactPassword(url)}: ${(error as Error).message}. ` +
        `Set DATABASE_URL to a server where its user may create databases` +
        (isDefault ? `, or stop the server on ${hostPort(url)} and the run starts its own.` : '.'),
    );
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function checkRedis(url: string, isDefault: boolean): Promise<void> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 10_000 });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    throw new TestServersError(
      `The tests cannot use Redis at ${redactPassword(url)}: ${(error as Error).message}. ` +
        `Set REDIS_URL to a Redis they may write keys to` +
        (isDefault ? `, or stop the server on ${hostPort(url)} and the run starts its own.` : '.'),
    );
  } finally {
    redis.disconnect();
  }
}

function hostPort(url: string): string {
  const { hostname, port } = new URL(url);
  return `${hostname}:${port}`;
}
