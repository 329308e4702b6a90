import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { NodeIdHolder } from '../domain/errors';
import { advisoryLockId } from '../util/advisory-lock-id';
import { clientExecutor, DuraflowDatabase, SqlExecutor } from './duraflow-database';

/** How long connecting or a statement of the lock's session may take before the session counts as lost. */
const SESSION_TIMEOUT_MS = 5_000;

const NODE_APPLICATION_NAME_PREFIX = 'duraflow-node ';

/** The `application_name` of a node lock's session: `duraflow-node <worker id>`, cut to the 63 characters PostgreSQL keeps. */
export function nodeLockApplicationName(workerId: string): string {
  return `${NODE_APPLICATION_NAME_PREFIX}${workerId}`.slice(0, 63);
}

/** The session advisory lock of node `nodeId` (in the database's own lock space: one per database). */
export function nodeLockId(nodeId: string): string {
  return advisoryLockId(`duraflow:node:${nodeId}`);
}

/**
 * A node's lock (`worker.nodeId`): a session-level advisory lock held by a connection of its own,
 * outside the pool (to `listenUrl` behind pgbouncer), for as long as the process runs. PostgreSQL
 * frees it the moment that session ends: a process killed (its socket closed), or a connection
 * cut and terminated by the server. A frozen process keeps it while its session lives.
 *
 * States: held -> lost (the session ended, a statement failed or timed out; never held again:
 * a new lock is taken with `take`) | released.
 */
export class NodeLock {
  private lostBecause: Error | undefined;
  private released = false;
  private confirmedAt = performance.now();
  private readonly lostListeners: Array<(error: Error) => void> = [];

  private constructor(private readonly client: Client) {
    // An idle session that ends says so here (and an error of a session nobody listens to must not crash the process).
    client.on('error', (error) => this.markLost(error));
    client.on('end', () => this.markLost(new Error('the session ended')));
  }

  /** The lock of `nodeId`, or who holds it when another session does. Rejects when PostgreSQL cannot be reached. */
  static async take(db: DuraflowDatabase, nodeId: string, workerId: string): Promise<{ lock: NodeLock } | { holder: NodeIdHolder }> {
    const client = db.createDedicatedClient(nodeLockApplicationName(workerId));
    const lock = new NodeLock(client);
    try {
      await withinTimeout(client.connect(), 'connecting');
      const { rows } = await withinTimeout(
        client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS locked', [nodeLockId(nodeId)]),
        'taking the lock',
      );
      if (rows[0].locked) return { lock };
      const holder = await readHolder(client, nodeId).catch(() => ({}));
      await lock.release();
      return { holder };
    } catch (error) {
      await lock.release();
      throw error;
    }
  }

  /** Whether the lock is known lost (its session ended). */
  get lost(): boolean {
    return this.lostBecause !== undefined;
  }

  /** Hears the loss of the lock, once. */
  onLost(listener: (error: Error) => void): void {
    this.lostListeners.push(listener);
  }

  /** Statements on the lock's session: they run only while it holds the lock. */
  get session(): SqlExecutor {
    return clientExecutor(this.client, false);
  }

  /**
   * Whether the lock is still held: confirmed by a round trip on its session when the last
   * confirmation is older than `maxAgeMs` (after a freeze, the session may have been ended
   * meanwhile). A failure marks it lost. Never rejects.
   */
  async confirmIfOld(maxAgeMs: number): Promise<boolean> {
    if (this.lost || this.released) return false;
    if (performance.now() - this.confirmedAt < maxAgeMs) return true;
    const sentAt = performance.now();
    try {
      await withinTimeout(this.client.query('SELECT 1'), 'confirming the lock');
      this.confirmedAt = sentAt;
      return !this.lost;
    } catch (error) {
      this.markLost(error as Error);
      return false;
    }
  }

  /** Ends the session, and the lock with it. Never throws; idempotent. */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    this.client.removeAllListeners('end');
    // The 'error' listener stays: a late error of a closed client must not go unhandled.
    await withinTimeout(this.client.end(), 'closing').catch(() => undefined);
  }

  private markLost(error: Error): void {
    if (this.lostBecause || this.released) return;
    this.lostBecause = error;
    for (const listener of this.lostListeners.splice(0)) listener(error);
    this.client.end().catch(() => undefined);
  }
}

/** The session that holds the lock of `nodeId`, as pg_stat_activity shows it. */
async function readHolder(client: Client, nodeId: string): Promise<NodeIdHolder> {
  const { rows } = await withinTimeout(
    client.query<{ pid: number; application_name: string | null; client_addr: string | null; backend_start: Date | null }>(
      `SELECT a.pid, a.application_name, host(a.client_addr) AS client_addr, a.backend_start
       FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
       WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
         AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
         AND ((l.classid::bigint << 32) | l.objid::bigint) = $1::bigint
       LIMIT 1`,
      [nodeLockId(nodeId)],
    ),
    'reading who holds the lock',
  );
  const row = rows[0];
  if (!row) return {};
  return {
    pid: row.pid,
    applicationName: row.application_name ?? undefined,
    clientAddress: row.client_addr ?? undefined,
    since: row.backend_start ?? undefined,
  };
}

function withinTimeout<T>(operation: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${SESSION_TIMEOUT_MS} ms`)), SESSION_TIMEOUT_MS);
  });
  return Promise.race([operation, timeout]).finally(() => clearTimeout(timer));
}
