import { ChildProcess, execFile, spawn } from 'node:child_process';
import { appendFileSync, chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { MovableAddress } from './movable-address';
import { freePort } from './ports';
import { eventually, sleep } from './waiting';

const run = promisify(execFile);
/** The name a standby gives itself in primary_conninfo, which synchronous_standby_names lists. */
const STANDBY_NAME = 'failover_standby';
const START_TIMEOUT_MS = 60_000;

export interface FailoverPairOptions {
  /** The standby confirms every commit before it returns (synchronous_standby_names, synchronous_commit = on). Default true. */
  synchronous?: boolean;
  /** The standby accepts read-only sessions (hot_standby). Off, it refuses every session with 57P03. Default true. */
  hotStandby?: boolean;
}

export interface FailoverTimes {
  /** When the primary's processes were SIGKILLed (Date.now()). */
  killedAt: number;
  /** When `pg_ctl promote` returned: the standby takes writes. */
  promotedAt: number;
  /** When the address reached the new primary. */
  movedAt: number;
}

type Role = 'primary' | 'standby';

/**
 * One PostgreSQL server of the pair: Debian's binaries run as the test's own child (its own
 * process group, so a SIGKILL of the group is a host that died), in a private data directory.
 */
class Server {
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private log = '';

  constructor(
    readonly dir: string,
    readonly port: number,
  ) {}

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  get running(): boolean {
    return this.child !== undefined;
  }

  async start(): Promise<void> {
    const child = spawn(binary('postgres'), ['-D', this.dir, '-p', String(this.port), '-k', this.dir, '-c', 'listen_addresses=127.0.0.1'], {
      ...asServerUser(),
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const capture = (chunk: Buffer) => (this.log = (this.log + chunk.toString()).slice(-20_000));
    child.stdout!.on('data', capture);
    child.stderr!.on('data', capture);
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    void this.exited.then(() => {
      if (this.child === child) this.child = undefined;
    });
    await eventually(`PostgreSQL on port ${this.port} accepts sessions`, () => this.accepts(), {
      timeoutMs: START_TIMEOUT_MS,
      everyMs: 100,
    }).catch((error: Error) => {
      throw new Error(`${error.message}\n${this.log}`);
    });
  }

  /** A session opens (a standby without hot_standby refuses them all, so it counts as up once it says so). */
  private async accepts(): Promise<boolean> {
    if (!this.child) throw new Error(`PostgreSQL on port ${this.port} exited\n${this.log}`);
    const client = new Client({ connectionString: this.url, connectionTimeoutMillis: 2_000 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.end();
      return true;
    } catch (error) {
      return (error as { code?: string }).code === '57P03' && /hot standby/i.test(this.log);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /** SIGKILL to the postmaster and every backend at once (its process group): no shutdown, no goodbye. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child?.pid) return;
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
    await this.exited;
    // Backends notice a dead postmaster by themselves; the group kill got them already.
    await sleep(50);
  }

  async stop(): Promise<void> {
    if (!this.child) return;
    this.child.kill('SIGINT');
    await this.exited;
  }

  async promote(): Promise<void> {
    await run(binary('pg_ctl'), ['promote', '-w', '-t', '60', '-D', this.dir], asServerUser());
  }

  get output(): string {
    return this.log;
  }
}

/**
 * A primary and a hot standby with streaming replication, from Debian's PostgreSQL binaries
 * (initdb, pg_basebackup, postgres, pg_ctl), private data directories under the temp dir, free
 * ports, trust authentication on 127.0.0.1; and an address in front of them (a TCP proxy of the
 * test, standing in for a virtual IP or DNS name) that reaches the primary. `failover()` is a
 * host failure: SIGKILL the primary, `pg_ctl promote` the standby, move the address to it.
 * The steps are public too, for the moments between them. Always `close()` it.
 */
export class FailoverPair {
  private generation = 0;

  private constructor(
    private readonly root: string,
    private primaryServer: Server,
    private standbyServer: Server | undefined,
    private readonly address: MovableAddress,
    private readonly options: Required<FailoverPairOptions>,
  ) {}

  static async start(options: FailoverPairOptions = {}): Promise<FailoverPair> {
    const resolved = { synchronous: options.synchronous ?? true, hotStandby: options.hotStandby ?? true };
    const root = mkdtempSync(path.join(tmpdir(), 'duraflow-failover-'));
    chmodSync(root, 0o755);
    const primary = new Server(path.join(root, 'node-0'), await freePort());
    const address = await MovableAddress.start(primary.port);
    const pair = new FailoverPair(root, primary, undefined, address, resolved);
    try {
      await initPrimary(primary.dir);
      await primary.start();
      await pair.addStandby();
      return pair;
    } catch (error) {
      await pair.close();
      throw error;
    }
  }

  /** The URL workers use: through the address the failover moves. */
  get url(): string {
    return this.urlOf('postgres');
  }

  /** A database through the address. */
  urlOf(database: string): string {
    return `postgres://postgres@127.0.0.1:${this.address.port}/${database}`;
  }

  /** The current primary, directly (not through the address). */
  primaryUrl(database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.primaryServer.port}/${database}`;
  }

  /** The current standby, directly; undefined once it was promoted and no new one was added. */
  standbyUrl(database = 'postgres'): string | undefined {
    return this.standbyServer && `postgres://postgres@127.0.0.1:${this.standbyServer.port}/${database}`;
  }

  /** Where the address leads now. */
  get addressTarget(): Role | 'nowhere' {
    if (this.address.targetPort === this.primaryServer.port && this.primaryServer.running) return 'primary';
    if (this.address.targetPort === this.standbyServer?.port) return 'standby';
    return 'nowhere';
  }

  /** The whole failover, as a host failure: the primary SIGKILLed, the standby promoted, the address moved. */
  async failover(): Promise<FailoverTimes> {
    const killedAt = Date.now();
    await this.killPrimary();
    await this.promoteStandby();
    const promotedAt = Date.now();
    await this.moveAddressTo('primary');
    return { killedAt, promotedAt, movedAt: Date.now() };
  }

  /** SIGKILLs the primary's postmaster and backends; the address still leads to its (dead) port. */
  async killPrimary(): Promise<void> {
    await this.primaryServer.kill();
  }

  /** A fast shutdown of the primary (a planned switchover): its sessions end with 57P01, the standby receives all its WAL. */
  async stopPrimary(): Promise<void> {
    await this.primaryServer.stop();
  }

  /** How many sessions through the address are open to the primary or the standby now. */
  sessionsTo(role: Role): number {
    const server = role === 'primary' ? this.primaryServer : this.standbyServer;
    return server ? (this.address.openSessions().get(server.port) ?? 0) : 0;
  }

  /** `pg_ctl promote` on the standby, which becomes the primary (the killed one is forgotten). */
  async promoteStandby(): Promise<void> {
    const standby = this.standbyServer;
    if (!standby) throw new Error('There is no standby to promote: addStandby() first');
    await standby.promote();
    await eventually('the promoted standby takes writes', () => isPrimary(standby.url), { timeoutMs: START_TIMEOUT_MS, everyMs: 100 });
    const old = this.primaryServer;
    if (old.running) await old.kill();
    this.primaryServer = standby;
    this.standbyServer = undefined;
  }

  /**
   * Points the address at a server: new sessions reach it. By default the sessions through the
   * address are cut (the old host is gone); `keepSessions` leaves them on the old server, as a
   * DNS change does.
   */
  async moveAddressTo(role: Role, options: { keepSessions?: boolean } = {}): Promise<void> {
    const server = role === 'primary' ? this.primaryServer : this.standbyServer;
    if (!server) throw new Error(`There is no ${role} to move the address to`);
    this.address.moveTo(server.port, { keepSessions: options.keepSessions ?? false });
    await Promise.resolve();
  }

  /**
   * A new standby of the current primary (pg_basebackup), streaming; synchronous when the pair
   * is. After a failover the new primary runs alone until this is called.
   */
  async addStandby(): Promise<void> {
    if (this.standbyServer) throw new Error('The pair has a standby already');
    const standby = new Server(path.join(this.root, `node-${++this.generation}`), await freePort());
    await baseBackup(this.primaryServer.port, standby.dir);
    appendFileSync(
      path.join(standby.dir, 'postgresql.auto.conf'),
      `primary_conninfo = 'host=127.0.0.1 port=${this.primaryServer.port} user=postgres application_name=${STANDBY_NAME}'\n` +
        `synchronous_standby_names = ''\n` +
        `hot_standby = ${this.options.hotStandby ? 'on' : 'off'}\n`,
    );
    await standby.start();
    this.standbyServer = standby;
    await eventually('the standby streams from the primary', () => this.streaming(), { timeoutMs: START_TIMEOUT_MS, everyMs: 100 });
    if (this.options.synchronous) {
      await this.onPrimary(`ALTER SYSTEM SET synchronous_standby_names = '${STANDBY_NAME}'`);
      await this.onPrimary(`SELECT pg_reload_conf()`);
      await eventually('the standby is synchronous', async () => (await this.syncState()) === 'sync', {
        timeoutMs: START_TIMEOUT_MS,
        everyMs: 100,
      });
    }
  }

  /** Runs one statement on the current primary, directly, on a session of its own. */
  async query<R extends Record<string, unknown>>(database: string, text: string, values: unknown[] = []): Promise<R[]> {
    return queryOnce<R>(this.primaryUrl(database), text, values);
  }

  /** Waits until the standby has replayed everything the primary wrote so far. */
  async waitForStandbyReplay(): Promise<void> {
    const [{ lsn }] = await this.query<{ lsn: string }>('postgres', `SELECT pg_current_wal_lsn()::text AS lsn`);
    await eventually(
      'the standby replayed the primary',
      async () => {
        const [row] = await this.query<{ caught: boolean }>(
          'postgres',
          `SELECT coalesce(bool_and(replay_lsn >= $1::pg_lsn), false) AS caught FROM pg_stat_replication`,
          [lsn],
        );
        return row?.caught;
      },
      { timeoutMs: START_TIMEOUT_MS, everyMs: 50 },
    );
  }

  /** What the servers printed (for a failure report). */
  get log(): string {
    return [this.primaryServer, this.standbyServer].map((server) => server?.output ?? '').join('\n');
  }

  async close(): Promise<void> {
    await this.address.close();
    for (const server of [this.standbyServer, this.primaryServer]) await server?.kill().catch(() => undefined);
    rmSync(this.root, { recursive: true, force: true });
  }

  private async onPrimary(text: string): Promise<void> {
    await queryOnce(this.primaryUrl(), text);
  }

  private async streaming(): Promise<boolean> {
    const rows = await queryOnce<{ state: string }>(this.primaryUrl(), `SELECT state FROM pg_stat_replication`);
    return rows.some((row) => row.state === 'streaming');
  }

  private async syncState(): Promise<string | undefined> {
    const rows = await queryOnce<{ sync_state: string }>(this.primaryUrl(), `SELECT sync_state FROM pg_stat_replication`);
    return rows[0]?.sync_state;
  }
}

/** The directory of Debian's PostgreSQL server binaries (the newest version installed). */
function binDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((name) => existsSync(path.join(root, name, 'bin', 'pg_basebackup'))) : [];
  if (versions.length === 0) throw new Error(`No PostgreSQL server binaries with pg_basebackup in ${root}: apt-get install postgresql`);
  return path.join(root, versions.sort((a, b) => Number(b) - Number(a))[0], 'bin');
}

function binary(name: string): string {
  return path.join(binDir(), name);
}

/** PostgreSQL refuses to run as root: as root, its programs run as the system user `postgres`. */
function asServerUser(): { uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return {};
  const passwd = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .map((line) => line.split(':'))
    .find((fields) => fields[0] === 'postgres');
  if (!passwd) throw new Error('Running as root needs the system user "postgres" (useradd --system postgres)');
  return { uid: Number(passwd[2]), gid: Number(passwd[3]) };
}

function ownDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const user = asServerUser();
  if (user.uid !== undefined) chownSync(dir, user.uid, user.gid!);
}

async function initPrimary(dir: string): Promise<void> {
  ownDir(dir);
  await run(binary('initdb'), ['-D', dir, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C'], asServerUser());
  appendFileSync(
    path.join(dir, 'postgresql.conf'),
    [
      'wal_level = replica',
      'max_wal_senders = 10',
      'max_replication_slots = 10',
      'wal_keep_size = 256MB',
      'hot_standby = on',
      'synchronous_commit = on',
      'max_connections = 200',
      // A SIGKILL is a process crash, not a power cut: the page cache survives it, so fsync adds nothing here.
      'fsync = off',
      'full_page_writes = off',
      'shared_buffers = 32MB',
      '',
    ].join('\n'),
  );
}

async function baseBackup(primaryPort: number, dir: string): Promise<void> {
  ownDir(dir);
  await run(
    binary('pg_basebackup'),
    ['-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres', '-D', dir, '-R', '-X', 'stream', '-c', 'fast', '--no-sync'],
    asServerUser(),
  );
}

async function isPrimary(url: string): Promise<boolean> {
  try {
    const [row] = await queryOnce<{ recovering: boolean }>(url, `SELECT pg_is_in_recovery() AS recovering`);
    return !row.recovering;
  } catch {
    return false;
  }
}

async function queryOnce<R extends Record<string, unknown>>(url: string, text: string, values: unknown[] = []): Promise<R[]> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end().catch(() => undefined);
  }
}
