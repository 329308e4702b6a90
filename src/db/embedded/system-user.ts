import { execFileSync } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { Logger } from '@nestjs/common';
import { EmbeddedDatabaseError } from './embedded-database.error';

/** The system user the server runs as when the engine runs as root (PostgreSQL refuses root). */
export const SYSTEM_USER = 'postgres';

export interface SystemUser {
  name: string;
  uid: number;
  gid: number;
}

/** Who runs the server: undefined when the engine is not root (then the server runs as the engine's user). */
export function serverUser(logger: Logger): SystemUser | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const existing = lookUp();
  if (existing) return existing;
  logger.warn(`Running as root: creating the system user "${SYSTEM_USER}" to run the embedded PostgreSQL`);
  try {
    execFileSync('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', SYSTEM_USER], {
      stdio: 'pipe',
    });
  } catch (error) {
    const stderr = String((error as { stderr?: Buffer }).stderr ?? '').trim();
    throw new EmbeddedDatabaseError(
      `The embedded PostgreSQL cannot run as root, and creating the system user "${SYSTEM_USER}" failed` +
        `${stderr ? `: ${stderr}` : ''}. Create it (useradd --system ${SYSTEM_USER}), run the engine as another user, or set DATABASE_URL.`,
    );
  }
  const created = lookUp();
  if (!created) throw new EmbeddedDatabaseError(`The system user "${SYSTEM_USER}" was created but cannot be found.`);
  return created;
}

function lookUp(): SystemUser | undefined {
  try {
    const id = (flag: string) => Number(execFileSync('id', [flag, SYSTEM_USER], { encoding: 'utf8', stdio: 'pipe' }).trim());
    return { name: SYSTEM_USER, uid: id('-u'), gid: id('-g') };
  } catch {
    return undefined;
  }
}

/**
 * The first directory on the way to `path` (itself included when it exists) that `user` may
 * not enter, or undefined when it can reach `path`. Directories that do not exist yet are skipped.
 */
export async function blockedDirectory(path: string, user: SystemUser): Promise<{ dir: string; mode: number } | undefined> {
  const dirs: string[] = [];
  for (let dir = path; ; dir = dirname(dir)) {
    dirs.unshift(dir);
    if (dirname(dir) === dir) break;
  }
  for (const dir of dirs) {
    const info = await stat(dir).catch(() => undefined);
    if (!info) return undefined; // created later, by root for this user
    if (!info.isDirectory()) continue;
    const bit = info.uid === user.uid ? 0o100 : info.gid === user.gid ? 0o010 : 0o001;
    if (!(info.mode & bit)) return { dir, mode: info.mode & 0o777 };
  }
  return undefined;
}
