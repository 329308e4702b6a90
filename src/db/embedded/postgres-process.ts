import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chown, mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { PostgresBinaries } from './postgres-binaries';
import { SystemUser } from './system-user';

const STOP_TIMEOUT_MS = 30_000;
/** Server log lines kept to explain a failed start (its real reason is only in the log). */
const LOG_TAIL_LINES = 30;

/** English messages (the readiness line is matched) and no dependency on the machine's locales. */
const ENV = { ...process.env, LC_ALL: 'C', LC_MESSAGES: 'C' };

/**
 * Creates a cluster in `clusterDir` whose only role, `postgres`, logs in with `password`
 * (scram-sha-256, locally and over TCP). The password reaches initdb through a 0600 file
 * of the server's user, removed right after.
 */
export async function initCluster(
  binaries: PostgresBinaries,
  clusterDir: string,
  password: string,
  user: SystemUser | undefined,
  log: LogTail,
): Promise<void> {
  await mkdir(clusterDir, { recursive: true, mode: 0o700 });
  const pwfile = join(dirname(clusterDir), `.initdb-${randomBytes(6).toString('hex')}`);
  await writeFile(pwfile, `${password}\n`, { mode: 0o600, flag: 'wx' });
  try {
    if (user) {
      await chown(clusterDir, user.uid, user.gid);
      await chown(pwfile, user.uid, user.gid);
    }
    const args = [
      `--pgdata=${clusterDir}`,
      '--username=postgres',
      '--auth=scram-sha-256',
      `--pwfile=${pwfile}`,
      '--encoding=UTF8',
      '--locale=C',
    ];
    const initdb = spawn(binaries.initdb, args, { ...ids(user), env: ENV, stdio: ['ignore', 'pipe', 'pipe'] });
    log.follow(initdb);
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
      initdb.once('error', reject);
      initdb.once('close', (exitCode, exitSignal) => resolve([exitCode, exitSignal]));
    });
    if (code !== 0) throw new Error(`initdb exited with ${code ?? signal}`);
  } finally {
    await rm(pwfile, { force: true });
  }
}

export interface ServerSettings {
  clusterDir: string;
  port: number;
  user: SystemUser | undefined;
  /** `-c name=value` settings, e.g. listen_addresses. */
  settings: Record<string, string>;
}

/**
 * A PostgreSQL server process, in a process group of its own (`detached`): the SIGINT a
 * terminal sends its foreground group on Ctrl-C reaches the engine, which hands its running
 * tasks back through this server and only then stops it. If the engine exits without
 * stopping it, its exit hook asks the server to stop; if the engine is killed, the server
 * outlives it, and the next start on this data directory stops it.
 */
export class PostgresServer {
  private exited = false;
  private readonly exit: Promise<void>;
  private readonly stopOnExit = () => this.signal('SIGINT');

  private constructor(private readonly child: ChildProcess) {
    this.exit = new Promise((resolve) =>
      child.once('exit', () => {
        this.exited = true;
        process.removeListener('exit', this.stopOnExit);
        resolve();
      }),
    );
    process.on('exit', this.stopOnExit);
  }

  /** Resolves once the server accepts connections; rejects (the server stopped) if it cannot start within `timeoutMs`. */
  static async start(binaries: PostgresBinaries, options: ServerSettings, log: LogTail, timeoutMs: number): Promise<PostgresServer> {
    const settings = Object.entries({ ...options.settings, lc_messages: 'C' }).flatMap(([name, value]) => ['-c', `${name}=${value}`]);
    const child = spawn(binaries.postgres, ['-D', options.clusterDir, '-p', String(options.port), ...settings], {
      ...ids(options.user),
      env: ENV,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const server = new PostgresServer(child);
    log.follow(child);
    const ready = new Promise<void>((resolve, reject) => {
      log.onLine((line) => line.includes('database system is ready to accept connections') && resolve());
      child.once('error', reject);
      void server.exit.then(() => reject(new Error('the server exited')));
    });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`it did not report ready within ${timeoutMs / 1000} s`)), timeoutMs);
    });
    try {
      await Promise.race([ready, late]);
      return server;
    } catch (error) {
      await server.stop().catch(() => undefined);
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  get pid(): number {
    return this.child.pid!;
  }

  get running(): boolean {
    return !this.exited;
  }

  /** A fast shutdown (SIGINT: sessions end, the data stays), then an immediate one if it hangs. */
  async stop(): Promise<void> {
    if (this.exited) return;
    this.signal('SIGINT');
    let timer: NodeJS.Timeout | undefined;
    const stopped = await Promise.race([
      this.exit.then(() => true),
      new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), STOP_TIMEOUT_MS))),
    ]);
    clearTimeout(timer);
    if (!stopped) {
      this.signal('SIGQUIT');
      await this.exit;
    }
  }

  private signal(signal: NodeJS.Signals): void {
    if (this.exited) return;
    try {
      process.kill(this.pid, signal);
    } catch {
      // Already gone: its exit event is on the way.
    }
  }
}

function ids(user: SystemUser | undefined): { uid?: number; gid?: number } {
  return user ? { uid: user.uid, gid: user.gid } : {};
}

/** The last lines initdb and the server printed; their FATAL line is the reason a start failed. */
export class LogTail {
  private readonly lines: string[] = [];
  private readonly listeners: Array<(line: string) => void> = [];

  follow(child: ChildProcess): void {
    for (const stream of [child.stdout, child.stderr]) {
      stream?.setEncoding('utf8');
      let partial = '';
      stream?.on('data', (chunk: string) => {
        const parts = (partial + chunk).split('\n');
        partial = parts.pop() ?? '';
        for (const line of parts) this.add(line);
      });
    }
  }

  onLine(listener: (line: string) => void): void {
    this.listeners.push(listener);
  }

  private add(line: string): void {
    if (!line.trim()) return;
    this.lines.push(line.trimEnd());
    if (this.lines.length > LOG_TAIL_LINES) this.lines.shift();
    for (const listener of this.listeners) listener(line);
  }

  explain(): string {
    const reasons = this.lines.filter((line) => /\b(FATAL|ERROR|PANIC|DETAIL|HINT)\b|error|denied|could not/i.test(line));
    const shown = reasons.length ? reasons : this.lines.slice(-5);
    return shown.length ? `\nPostgreSQL said:\n  ${shown.join('\n  ')}` : '';
  }
}
