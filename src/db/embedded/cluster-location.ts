import { createHash } from 'node:crypto';
import { access, chmod, mkdir } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Logger } from '@nestjs/common';
import { EmbeddedDatabaseError } from './embedded-database.error';
import { sharedStateDir, SHARED_STATE_DIR } from './postgres-binaries';
import { blockedDirectory, SystemUser } from './system-user';

/**
 * Where the cluster's files live: `<dataDir>/postgres`, unless the engine runs as root and the
 * `postgres` user (which runs the server) cannot enter a folder above it, e.g. a project in a
 * container's /root/app. Then it lives in SHARED_STATE_DIR, under a name made from the data
 * directory (the same at every start), and the start says so. The engine's own files (the
 * password, the lock) stay in the data directory, which only the engine needs to reach.
 */
export async function clusterLocation(dataDir: string, user: SystemUser | undefined, logger: Logger): Promise<string> {
  const preferred = join(dataDir, 'postgres');
  if (!user) return preferred;
  const slug = basename(dirname(dataDir)).replace(/[^A-Za-z0-9._-]/g, '_') || 'root';
  const fallback = join(SHARED_STATE_DIR, `${slug}-${createHash('sha256').update(dataDir).digest('hex').slice(0, 8)}`, 'postgres');
  const blocked = await blockedDirectory(dirname(preferred), user);
  if (await hasCluster(fallback)) {
    logger.log(`The embedded PostgreSQL keeps its files in ${fallback} (the "${user.name}" user cannot enter ${blocked?.dir ?? dataDir})`);
    return fallback;
  }
  if (!blocked) return preferred;
  if (await hasCluster(preferred)) {
    throw new EmbeddedDatabaseError(
      `The embedded PostgreSQL runs as the "${user.name}" user (PostgreSQL refuses root), which cannot enter ${blocked.dir} ` +
        `(mode ${blocked.mode.toString(8)}), where its cluster ${preferred} is. Let it in (chmod o+x on the folders above), ` +
        `move the cluster to ${fallback}, or set DATABASE_URL.`,
    );
  }
  logger.warn(
    `The "${user.name}" user, which runs the embedded PostgreSQL (PostgreSQL refuses root), cannot enter ${blocked.dir} ` +
      `(mode ${blocked.mode.toString(8)}): the database files go to ${fallback} instead (the engine's own stay in ${dataDir}). ` +
      `Set DURAFLOW_DATA_DIR to a directory it can reach to choose another place.`,
  );
  await sharedStateDir();
  await mkdir(dirname(fallback), { recursive: true });
  await chmod(dirname(fallback), 0o755);
  return fallback;
}

async function hasCluster(clusterDir: string): Promise<boolean> {
  return access(join(clusterDir, 'PG_VERSION')).then(
    () => true,
    () => false,
  );
}
