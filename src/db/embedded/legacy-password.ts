import { chown, mkdtemp, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Logger } from '@nestjs/common';
import { Client } from 'pg';
import { ClusterPassword } from './cluster-password';
import { EmbeddedDatabaseError } from './embedded-database.error';
import { PostgresBinaries } from './postgres-binaries';
import { LogTail, PostgresServer } from './postgres-process';
import { SystemUser } from './system-user';

/** The password every cluster made before per-cluster passwords had: anyone on the machine knew it. */
const LEGACY_PASSWORD = 'duraflow';

export interface LegacyCluster {
  binaries: PostgresBinaries;
  dataDir: string;
  clusterDir: string;
  port: number;
  user: SystemUser | undefined;
  logger: Logger;
  startTimeoutMs: number;
}

/**
 * A cluster without a password file was made by an earlier engine with the fixed password
 * "duraflow". It gets a random one before it serves anything: the server is started with no
 * TCP listener and a Unix socket in a fresh 0700 directory (only the engine reaches it), the
 * role's password is changed, and the new one is written to the password file. A new password
 * is first kept as "pending", so a crash half way is finished on the next start.
 *
 * @throws EmbeddedDatabaseError when neither the old password nor a pending one is accepted.
 */
export async function migrateLegacyPassword(cluster: LegacyCluster): Promise<void> {
  const { dataDir, logger } = cluster;
  const pending = await ClusterPassword.read(dataDir, logger, ClusterPassword.PENDING_FILE);
  const password = pending ?? ClusterPassword.generate();
  if (!pending) await ClusterPassword.write(dataDir, password, ClusterPassword.PENDING_FILE);
  logger.warn(
    `The embedded PostgreSQL cluster in ${cluster.clusterDir} was created with the fixed password "${LEGACY_PASSWORD}", ` +
      `which any user of this machine could use: giving it a random password`,
  );
  const socketDir = await mkdtemp(join(tmpdir(), 'duraflow-pg-'));
  const log = new LogTail();
  try {
    if (cluster.user) await chown(socketDir, cluster.user.uid, cluster.user.gid);
    const server = await PostgresServer.start(
      cluster.binaries,
      {
        clusterDir: cluster.clusterDir,
        port: cluster.port,
        user: cluster.user,
        settings: { listen_addresses: '', unix_socket_directories: socketDir },
      },
      log,
      cluster.startTimeoutMs,
    );
    try {
      await changePassword(socketDir, [LEGACY_PASSWORD, password], password, cluster);
    } finally {
      await server.stop();
    }
  } catch (error) {
    if (error instanceof EmbeddedDatabaseError) throw error;
    throw new EmbeddedDatabaseError(
      `Could not give the embedded PostgreSQL cluster in ${cluster.clusterDir} a password of its own: ${(error as Error).message}${log.explain()}`,
    );
  } finally {
    await rm(socketDir, { recursive: true, force: true });
  }
  await rename(ClusterPassword.path(dataDir, ClusterPassword.PENDING_FILE), ClusterPassword.path(dataDir));
  logger.log(`The embedded PostgreSQL cluster's new password is in ${ClusterPassword.path(dataDir)} (mode 0600)`);
}

async function changePassword(socketDir: string, candidates: string[], password: string, cluster: LegacyCluster): Promise<void> {
  for (const candidate of candidates) {
    const client = new Client({ host: socketDir, port: cluster.port, user: 'postgres', password: candidate, database: 'postgres' });
    try {
      await client.connect();
    } catch (error) {
      await client.end().catch(() => undefined);
      if ((error as { code?: string }).code === '28P01') continue; // not this password
      throw error;
    }
    try {
      await client.query(`ALTER ROLE postgres PASSWORD ${client.escapeLiteral(password)}`);
      return;
    } finally {
      await client.end();
    }
  }
  throw new EmbeddedDatabaseError(
    `The embedded PostgreSQL cluster in ${cluster.clusterDir} has no password file, and its postgres role does not take the ` +
      `password "${LEGACY_PASSWORD}" that earlier engines gave it, so the engine cannot log in. If you changed that ` +
      `password, write it to ${ClusterPassword.path(cluster.dataDir)} (mode 0600); otherwise move the cluster ` +
      `away to let the engine create a new one, or set DATABASE_URL.`,
  );
}
