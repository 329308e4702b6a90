import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { link, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { EmbeddedDatabaseError } from './embedded-database.error';

/** A process, told apart from a later one that got the same pid by its start time (Linux). */
interface ProcessIdentity {
  pid: number;
  startTime?: string;
}

const LOCK_FILE = 'engine.lock';

/**
 * One engine per data directory. `<dataDir>/engine.lock` names the engine that uses it; a
 * second engine refuses to start while that one runs, instead of taking its database away. A
 * lock whose engine is gone (killed) is stale and taken over. Created with `link()`, which
 * either makes the complete file appear or fails: a starting engine never reads half a lock.
 */
export class DataDirLock {
  private constructor(
    private readonly path: string,
    private readonly content: string,
  ) {}

  static async acquire(dataDir: string): Promise<DataDirLock> {
    const path = join(dataDir, LOCK_FILE);
    const content = JSON.stringify(identify(process.pid));
    for (let attempt = 0; attempt < 5; attempt++) {
      if (await createExclusively(path, content)) return new DataDirLock(path, content);
      const held = await readFile(path, 'utf8').catch(() => undefined);
      if (held === undefined) continue; // released meanwhile
      const holder = parse(held);
      if (holder && isRunning(holder)) {
        throw new EmbeddedDatabaseError(
          `Another Duraflow engine (pid ${holder.pid}) is running on the data directory ${dataDir} (${path}). ` +
            `Stop it first, or give this engine a data directory of its own (DURAFLOW_DATA_DIR) or a database (DATABASE_URL).`,
        );
      }
      // Its engine is gone. Removed only if it is still that very lock (another starter may have replaced it).
      if ((await readFile(path, 'utf8').catch(() => undefined)) === held) await rm(path, { force: true });
    }
    throw new EmbeddedDatabaseError(
      `Could not take ${path}: other engines keep starting on ${dataDir}. Start one engine per data directory.`,
    );
  }

  async release(): Promise<void> {
    if ((await readFile(this.path, 'utf8').catch(() => undefined)) === this.content) await rm(this.path, { force: true });
  }
}

async function createExclusively(path: string, content: string): Promise<boolean> {
  const temporary = `${path}.${process.pid}.${randomBytes(4).toString('hex')}`;
  await writeFile(temporary, content);
  try {
    await link(temporary, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    await rm(temporary, { force: true });
  }
}

function parse(content: string): ProcessIdentity | undefined {
  try {
    const value = JSON.parse(content) as ProcessIdentity;
    return Number.isSafeInteger(value.pid) && value.pid > 0 ? value : undefined;
  } catch {
    return undefined;
  }
}

function identify(pid: number): ProcessIdentity {
  return { pid, startTime: startTimeOf(pid) };
}

function isRunning(holder: ProcessIdentity): boolean {
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  // A pid reused by another process after a reboot or a long time is not the engine.
  return holder.startTime === undefined || startTimeOf(holder.pid) === holder.startTime;
}

/** Field 22 of /proc/<pid>/stat: when the process started, in clock ticks since boot. */
function startTimeOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}
