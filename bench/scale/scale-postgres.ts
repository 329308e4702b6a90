import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { appendFileSync, chownSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { freePort } from '../../test/support/ports';
import { sleep } from '../../test/support/waiting';

/** The Debian server binaries (the newest installed major version). */
function binDir(): string {
  const versions = readdirSync('/usr/lib/postgresql')
    .filter((name) => /^\d+$/.test(name))
    .sort((a, b) => Number(b) - Number(a));
  if (!versions.length) throw new Error('No PostgreSQL server binaries in /usr/lib/postgresql');
  return `/usr/lib/postgresql/${versions[0]}/bin`;
}

function postgresIds(): { uid: number; gid: number } | undefined {
  if (userInfo().uid !== 0) return undefined;
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
  return { uid, gid };
}

/**
 * A PostgreSQL server of the scale bench's own (never the shared one): a fresh cluster in a
 * temp dir from the system's binaries, trust authentication for 127.0.0.1 and the namespaces'
 * 10.200.0.0/16, listening on every address of this (root) namespace, with pg_stat_statements.
 */
export class ScalePostgres {
  private constructor(
    private readonly dir: string,
    private readonly child: ChildProcess,
    readonly port: number,
  ) {}

  static async start(settings: Record<string, string> = {}): Promise<ScalePostgres> {
    const ids = postgresIds();
    const dir = mkdtempSync(path.join(tmpdir(), 'duraflow-scale-pg-'));
    if (ids) chownSync(dir, ids.uid, ids.gid);
    const data = path.join(dir, 'data');
    execFileSync(path.join(binDir(), 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'], {
      ...ids,
      stdio: 'ignore',
    });
    appendFileSync(path.join(data, 'pg_hba.conf'), '\nhost all all 10.200.0.0/16 trust\n');
    const port = await freePort();
    const options = {
      listen_addresses: '*',
      unix_socket_directories: dir,
      max_connections: '300',
      shared_preload_libraries: 'pg_stat_statements',
      'pg_stat_statements.track': 'all',
      ...settings,
    };
    const args = ['-D', data, '-p', String(port), ...Object.entries(options).flatMap(([name, value]) => ['-c', `${name}=${value}`])];
    const child = spawn(path.join(binDir(), 'postgres'), args, { ...ids, stdio: 'ignore', detached: true });
    process.once('exit', () => child.kill('SIGQUIT'));
    const server = new ScalePostgres(dir, child, port);
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        await server.query('SELECT 1');
        break;
      } catch (error) {
        if (Date.now() > deadline || child.exitCode !== null) throw error;
        await sleep(100);
      }
    }
    await server.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    return server;
  }

  url(database = 'postgres', host = '127.0.0.1', port = this.port): string {
    return `postgres://postgres@${host}:${port}/${database}`;
  }

  async query<R extends Record<string, unknown> = Record<string, unknown>>(
    text: string,
    values: unknown[] = [],
    database = 'postgres',
  ): Promise<R[]> {
    const client = new Client({ connectionString: this.url(database) });
    await client.connect();
    try {
      return (await client.query<R>(text, values)).rows;
    } finally {
      await client.end();
    }
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) {
      const exited = new Promise((resolve) => this.child.once('exit', resolve));
      this.child.kill('SIGINT');
      await Promise.race([exited, sleep(30_000)]);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
