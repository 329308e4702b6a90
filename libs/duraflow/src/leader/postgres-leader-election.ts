import { Client } from 'pg';
import { REAPER_LEADER_KEY } from '../duraflow.constants';
import { advisoryLockId } from '../util/advisory-lock-id';
import { BaseLeaderElection } from './base-leader-election';
import { LeaderElectionLogger } from './leader-election';

/** How long connecting or checking the session may take before the connection counts as lost. */
const SESSION_TIMEOUT_MS = 5_000;

export interface PostgresLeaderElectionOptions {
  /**
   * A new, unconnected client for the session that holds the lock (in the module:
   * `DuraflowDatabase.createDedicatedClient()`). Called again after a connection is lost.
   */
  createClient: () => Client | Promise<Client>;
  /** Hashed into the 64-bit advisory lock id. Default `duraflow:reaper:leader`. */
  key?: string;
  logger?: LeaderElectionLogger;
}

/**
 * Leader election without Redis: a session-level advisory lock held on a connection of its
 * own, so the lock lives exactly as long as the session. A leader proves the session is
 * still there on every tick; when it is gone (server restart, pg_terminate_backend, network)
 * the lock went with it, this node steps down and tries again on a fresh connection.
 * Advisory locks are per database: nodes on the same database compete, others do not.
 */
export class PostgresLeaderElection extends BaseLeaderElection {
  readonly kind = 'postgres';
  readonly key: string;
  /** The advisory lock's bigint id (`advisoryLockId(key)`), as text. */
  readonly lockId: string;
  private readonly createClient: () => Client | Promise<Client>;
  private client: Client | undefined;
  private pid: number | undefined;
  /** The session died between ticks: the next tick reports it instead of reconnecting at once. */
  private sessionLost = false;

  constructor(options: PostgresLeaderElectionOptions) {
    super('PostgreSQL', options.logger);
    this.key = options.key ?? REAPER_LEADER_KEY;
    this.lockId = advisoryLockId(this.key);
    this.createClient = options.createClient;
  }

  /** The server process of the session that holds (or tries for) the lock, while connected. */
  get backendPid(): number | undefined {
    return this.client ? this.pid : undefined;
  }

  isLeader(): boolean {
    return this.leading;
  }

  protected async holdOrAcquire(): Promise<boolean> {
    if (this.sessionLost) {
      // Stepping down for one tick lets a follower, whose session survived, take the lock.
      this.sessionLost = false;
      return false;
    }
    let client = this.client;
    try {
      client ??= await this.connect();
      if (this.leading) {
        await withinTimeout(client.query('SELECT 1'), 'checking the session');
      } else {
        const { rows } = await withinTimeout(
          client.query<{ acquired: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS acquired', [this.lockId]),
          'taking the advisory lock',
        );
        // The session may have died while the query ran: then the lock died with it.
        this.setLeading(rows[0].acquired && this.client === client);
      }
      this.noteReachable();
    } catch (error) {
      if (client) this.dropConnection(client);
      // This tick reports the loss itself, however the connection told of it first.
      this.sessionLost = false;
      this.noteOutage('PostgreSQL session lost', error);
    }
    return this.leading;
  }

  private async connect(): Promise<Client> {
    const client = await this.createClient();
    client.on('error', (error) => this.onConnectionLost(client, error));
    client.on('end', () => this.onConnectionLost(client, new Error('connection ended')));
    try {
      await withinTimeout(client.connect(), 'connecting');
      const { rows } = await withinTimeout(client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid'), 'connecting');
      this.pid = rows[0].pid;
    } catch (error) {
      client.removeAllListeners('end');
      client.end().catch(() => undefined);
      throw error;
    }
    this.client = client;
    return client;
  }

  /** An idle session that dies says so here, before the next tick finds out. */
  private onConnectionLost(client: Client, error: Error): void {
    if (this.client !== client) return;
    this.dropConnection(client);
    this.sessionLost = true;
    if (!this.closed) this.noteOutage('PostgreSQL session lost', error);
  }

  /** The lock belonged to that session: whatever happens to it now, this node no longer holds it. */
  private dropConnection(client: Client): void {
    if (this.client === client) this.client = undefined;
    this.setLeading(false);
    client.removeAllListeners('end');
    // The 'error' listener stays: a late error of a dropped client must not go unhandled.
    client.end().catch(() => undefined);
  }

  protected leadershipChanged(leading: boolean): string {
    return leading
      ? 'Reaper leader election: this node holds the PostgreSQL advisory lock and leads'
      : 'Reaper leader election: this node no longer leads';
  }

  protected async release(): Promise<void> {
    const client = this.client;
    const leading = this.leading;
    this.client = undefined;
    this.leading = false;
    if (!client) return;
    client.removeAllListeners('end');
    try {
      if (leading) {
        await withinTimeout(client.query('SELECT pg_advisory_unlock($1::bigint)', [this.lockId]), 'releasing the lock');
      }
    } catch {
      // Ending the session below releases the lock all the same.
    }
    await withinTimeout(client.end(), 'closing').catch(() => undefined);
  }
}

function withinTimeout<T>(operation: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${SESSION_TIMEOUT_MS} ms`)), SESSION_TIMEOUT_MS);
  });
  return Promise.race([operation, timeout]).finally(() => clearTimeout(timer));
}
