import { ChildProcess, spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { freePort } from './ports';
import { sleep } from './waiting';

export const PGBOUNCER_BINARY = '/usr/sbin/pgbouncer';

export interface PgBouncerOptions {
  /** The PostgreSQL behind it. Default the shared one, 127.0.0.1:5432. */
  targetPort?: number;
  /** Server connections per database and user. Default 2: a pool of 10 clients shares them, as behind a real pooler. */
  poolSize?: number;
}

/**
 * The test's own pgbouncer (Debian's package) in transaction mode in front of a PostgreSQL:
 * its config in a temp dir, on a free port, `auth_type = any` (the shared server trusts
 * 127.0.0.1). It refuses to run as root, so as root it drops to the `postgres` user. Always
 * `stop()` it; it also dies with the test process.
 */
export class PgBouncer {
  private constructor(
    readonly port: number,
    private readonly dir: string,
    private readonly child: ChildProcess,
    private readonly output: string[],
  ) {}

  static async start(options: PgBouncerOptions = {}): Promise<PgBouncer> {
    const port = await freePort();
    const dir = mkdtempSync(path.join(tmpdir(), 'duraflow-pgbouncer-'));
    const config = path.join(dir, 'pgbouncer.ini');
    writeFileSync(
      config,
      [
        '[databases]',
        `* = host=127.0.0.1 port=${options.targetPort ?? 5432} user=postgres`,
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
    );
    const asRoot = userInfo().uid === 0;
    if (asRoot) {
      chmodSync(dir, 0o755);
      chownSync(dir, postgresUid(), -1);
    }
    const output: string[] = [];
    const child = spawn(PGBOUNCER_BINARY, [...(asRoot ? ['-u', 'postgres'] : []), config], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    const bouncer = new PgBouncer(port, dir, child, output);
    process.once('exit', () => child.kill('SIGKILL'));
    await bouncer.waitUntilServing();
    return bouncer;
  }

  /** A URL of `database` through the pooler. */
  url(database: string): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
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

function postgresUid(): number {
  // The Debian package's user; its uid is in /etc/passwd.
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith('postgres:'));
  if (!line) throw new Error('pgbouncer refuses to run as root and there is no postgres user to run it as');
  return Number(line.split(':')[2]);
}
