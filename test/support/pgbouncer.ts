import { ChildProcess, spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { SERVER_URL } from './database';
import { freePort } from './ports';
import { sleep } from './waiting';

export const PGBOUNCER_BINARY = '/usr/sbin/pgbouncer';

export interface PgBouncerOptions {
  /**
   * The PostgreSQL behind it, as a URL whose host, port, user and password it logs in with.
   * Default the run's server (SERVER_URL: DATABASE_URL, or the server the global setup started).
   */
  serverUrl?: string;
  /** Server connections per database and user. Default 2: a pool of 10 clients shares them, as behind a real pooler. */
  poolSize?: number;
}

/**
 * The test's own pgbouncer (Debian's package) in transaction mode in front of a PostgreSQL (the
 * run's server unless told otherwise): its config in a temp dir only its user can read, on a free
 * port. It logs in to the server as the server URL's user, with its password; its clients are
 * not asked for one (`auth_type = any`: it listens on 127.0.0.1 only). It refuses to run as
 * root, so as root it drops to the `postgres` user. Always `stop()` it; it also dies with the
 * test process.
 */
export class PgBouncer {
  private constructor(
    readonly port: number,
    private readonly user: string,
    private readonly dir: string,
    private readonly child: ChildProcess,
    private readonly output: string[],
  ) {}

  static async start(options: PgBouncerOptions = {}): Promise<PgBouncer> {
    const port = await freePort();
    const dir = mkdtempSync(path.join(tmpdir(), 'duraflow-pgbouncer-'));
    const config = path.join(dir, 'pgbouncer.ini');
    const server = new URL(options.serverUrl ?? SERVER_URL);
    const host = plainValue('host', server.hostname.replace(/^\[|\]$/g, ''));
    const user = plainValue('user', decodeURIComponent(server.username) || 'postgres');
    const password = server.password ? ` password=${quotedValue(decodeURIComponent(server.password))}` : '';
    writeFileSync(
      config,
      [
        '[databases]',
        `* = host=${host} port=${server.port || 5432} user=${user}${password}`,
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${port}`,
        'unix_socket_dir =',
        'auth_type = any',
        'pool_mode = transaction',
        `default_pool_size = ${options.poolSize ?? 2}`,
        'max_client_conn = 500',
        'ignore_startup_parameters = extra_float_digits,options',
        'server_reset_query =',
        `pidfile = ${path.join(dir, 'pgbouncer.pid')}`,
        '',
      ].join('\n'),
      { mode: 0o600 },
    );
    const asRoot = userInfo().uid === 0;
    if (asRoot) {
      chmodSync(dir, 0o755);
      chownSync(dir, postgresUid(), -1);
      chownSync(config, postgresUid(), -1);
    }
    const output: string[] = [];
    const child = spawn(PGBOUNCER_BINARY, [...(asRoot ? ['-u', 'postgres'] : []), config], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    const bouncer = new PgBouncer(port, user, dir, child, output);
    process.once('exit', () => child.kill('SIGKILL'));
    await bouncer.waitUntilServing();
    return bouncer;
  }

  /** A URL of `database` through the pooler (as the server's user; the pooler asks for no password). */
  url(database: string): string {
    return `postgres://${encodeURIComponent(this.user)}@127.0.0.1:${this.port}/${database}`;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) {
      const exited = new Promise((resolve) => this.child.once('exit', resolve));
      this.child.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([exited, new Promise((resolve) => (timer = setTimeout(resolve, 3_000)))]);
      clearTimeout(timer);
      this.child.kill('SIGKILL');
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  private async waitUntilServing(): Promise<void> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const client = new Client({ connectionString: this.url('postgres') });
      client.on('error', () => undefined);
      try {
        await client.connect();
        await client.query('SELECT 1');
        await client.end();
        return;
      } catch (error) {
        await client.end().catch(() => undefined);
        if (Date.now() > deadline || this.child.exitCode !== null) {
          throw new Error(`pgbouncer did not start: ${(error as Error).message}\n${this.output.join('')}`, { cause: error });
        }
        await sleep(50);
      }
    }
  }
}

/** A host or user name as the pooler's `[databases]` line takes it unquoted. */
function plainValue(what: string, value: string): string {
  if (/^[A-Za-z0-9_.:-]+$/.test(value)) return value;
  throw new Error(
    `The test pgbouncer cannot log in to a server whose ${what} is ${JSON.stringify(value)}: use letters, digits, ".", "-" or "_"`,
  );
}

/** A password in the `[databases]` line: single-quoted, which takes anything but a quote or a backslash. */
function quotedValue(value: string): string {
  if (!/['\\]/.test(value)) return `'${value}'`;
  throw new Error('The test pgbouncer cannot log in with a password that holds a quote or a backslash: set DATABASE_URL to another role');
}

function postgresUid(): number {
  // The Debian package's user; its uid is in /etc/passwd.
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith('postgres:'));
  if (!line) throw new Error('pgbouncer refuses to run as root and there is no postgres user to run it as');
  return Number(line.split(':')[2]);
}
