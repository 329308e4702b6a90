import { randomBytes } from 'node:crypto';
import { chmod, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Logger } from '@nestjs/common';

/**
 * The password of the embedded cluster's `postgres` role: random per cluster, kept in
 * `<dataDir>/postgres.password`, mode 0600, owned by the engine's user. Nobody else on the
 * machine can read it, and the server takes no login without it (scram-sha-256, no trust).
 */
export class ClusterPassword {
  static readonly FILE = 'postgres.password';
  /** A password made for a migration that may not have been applied yet (see legacy-password.ts). */
  static readonly PENDING_FILE = 'postgres.password.pending';

  static generate(): string {
    return randomBytes(32).toString('base64url');
  }

  static path(dataDir: string, file = ClusterPassword.FILE): string {
    return join(dataDir, file);
  }

  /** The password, or undefined when the file does not exist. A file others could read is made 0600 again. */
  static async read(dataDir: string, logger: Logger, file = ClusterPassword.FILE): Promise<string | undefined> {
    const path = ClusterPassword.path(dataDir, file);
    const info = await stat(path).catch(() => undefined);
    if (!info) return undefined;
    if (info.mode & 0o077) {
      await chmod(path, 0o600);
      logger.warn(`${path} was readable by other users (mode ${(info.mode & 0o777).toString(8)}): made it 0600`);
    }
    const password = (await readFile(path, 'utf8')).trim();
    return password || undefined;
  }

  /** Written whole or not at all (a temporary file renamed over it), 0600 from the start. */
  static async write(dataDir: string, password: string, file = ClusterPassword.FILE): Promise<string> {
    const path = ClusterPassword.path(dataDir, file);
    const temporary = `${path}.${process.pid}.tmp`;
    await rm(temporary, { force: true });
    await writeFile(temporary, `${password}\n`, { mode: 0o600, flag: 'wx' });
    await rename(temporary, path);
    return path;
  }
}
