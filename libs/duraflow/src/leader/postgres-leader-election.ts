import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { REAPER_LEADER_KEY } from '../domain/duraflow.constants';
import { clientExecutor } from '../persistence/duraflow-database';
import { acquireOrRenewLeaderLease, releaseLeaderLease } from '../persistence/sql/leader-lease';
import { BaseLeaderElection } from './base-leader-election';
import { LeaderFence } from '../persistence/lifecycle/leader-fence';
import { LeaderElectionLogger } from './leader-election';

/** How long connecting or a statement may take before the connection counts as lost. */
const SESSION_TIMEOUT_MS = 5_000;

export interface PostgresLeaderElectionOptions {
  /**
   * A new, unconnected client for the election's own connection (in the module:
   * `DuraflowDatabase.createDedicatedClient()`), so a busy pool never delays a renewal.
   * Called again after a connection is lost.
   */
  createClient: () => Client | Promise<Client>;
  /** The lease row's name. Default `duraflow:reaper:leader`. */
  key?: string;
  /** The lease row's holder while this node leads: unique per process. */
  workerId: string;
  /** How long a lease lasts unless renewed: a frozen or dead leader is replaced within it. */
  ttlMs: number;
  logger?: LeaderElectionLogger;
}

/**
 * Leader election without Redis: a lease row in `duraflow_leader` (name, holder, term,
 * expires_at). A tick renews it by compare-and-set on the holder, or takes it once it expired
 * with term + 1 (persistence/sql/leader-lease.ts). Leadership is judged locally from the time
 * the last renewal was *sent*, minus a safety margin, so this node stops believing it leads
 * before the row can pass to another node; and the reap statement checks the row itself
 * (holder, term, expiry, locked FOR SHARE: see LeaderFence), so a leader that wakes from a
 * freeze after losing its lease reaps nothing, whatever it believes.
 *
 * States: following (no term) -> leading (term T, valid until sentAt + ttl - margin) on a
 * tick that got the row; leading -> following when a renewal finds another holder, fails, or
 * comes too late; the row's term only grows, so a lost term is never valid again.
 * (Until issue 14 this was a session advisory lock: a frozen process kept its session open,
 * and so its leadership, for as long as it was frozen.)
 */
export class PostgresLeaderElection extends BaseLeaderElection {
  readonly kind = 'postgres';
  readonly key: string;
  readonly workerId: string;
  private readonly ttlMs: number;
  /** Covers clock-rate drift between this process and PostgreSQL. */
  private readonly safetyMarginMs: number;
  private readonly createClient: () => Client | Promise<Client>;
  private client: Client | undefined;
  private pid: number | undefined;
  /** The term this node leads under; undefined while it follows. */
  private heldTerm: string | undefined;
  /** `performance.now()` until which this node certainly holds the lease; 0 when it does not. */
  private validUntil = 0;
  /** The session died between ticks: the next tick reports it instead of reconnecting at once. */
  private sessionLost = false;

  constructor(options: PostgresLeaderElectionOptions) {
    super('PostgreSQL', options.logger);
    this.key = options.key ?? REAPER_LEADER_KEY;
    this.workerId = options.workerId;
    this.ttlMs = options.ttlMs;
    this.safetyMarginMs = Math.min(1_000, Math.ceil(options.ttlMs / 10));
    this.createClient = options.createClient;
  }

  /** The server process of the election's connection, while connected. */
  get backendPid(): number | undefined {
    return this.client ? this.pid : undefined;
  }

  /** The lease's term while this node leads. */
  get term(): string | undefined {
    return this.isLeader() ? this.heldTerm : undefined;
  }

  isLeader(): boolean {
    return performance.now() < this.validUntil;
  }

  /** While leading: the row, holder and term the reap statement must still find (no round trip). */
  async fence(): Promise<LeaderFence | undefined> {
    const term = this.term;
    return term === undefined ? undefined : { kind: 'lease', name: this.key, holder: this.workerId, term };
  }

  protected async holdOrAcquire(): Promise<boolean> {
    if (this.sessionLost) {
      this.sessionLost = false;
      this.stepDown();
      return false;
    }
    let client = this.client;
    try {
      client ??= await this.connect();
      const sentAt = performance.now();
      const term = await withinTimeout(
        acquireOrRenewLeaderLease(clientExecutor(client), this.key, this.workerId, this.ttlMs),
        'renewing or taking the leader lease',
      );
      this.heldTerm = term ?? undefined;
      this.validUntil = term === null ? 0 : sentAt + this.ttlMs - this.safetyMarginMs;
      this.noteReachable();
    } catch (error) {
      if (client) this.dropConnection(client);
      // This tick reports the loss itself, however the connection told of it first.
      this.sessionLost = false;
      this.noteOutage('PostgreSQL session lost', error);
    }
    this.setLeading(this.isLeader());
    return this.isLeader();
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

  /** Nothing proves the lease while the database does not answer: not leader until a renewal lands. */
  private dropConnection(client: Client): void {
    if (this.client === client) this.client = undefined;
    this.stepDown();
    client.removeAllListeners('end');
    // The 'error' listener stays: a late error of a dropped client must not go unhandled.
    client.end().catch(() => undefined);
  }

  private stepDown(): void {
    this.validUntil = 0;
    this.heldTerm = undefined;
    this.setLeading(false);
  }

  protected leadershipChanged(leading: boolean): string {
    return leading
      ? `Reaper leader election: this node (${this.workerId}) holds the PostgreSQL leader lease (term ${this.heldTerm}) and leads`
      : `Reaper leader election: this node (${this.workerId}) no longer leads`;
  }

  protected async release(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.validUntil = 0;
    this.heldTerm = undefined;
    this.leading = false;
    if (!client) return;
    client.removeAllListeners('end');
    try {
      // Run even when this node thinks it follows: a lost reply may have left the row with its name.
      await withinTimeout(releaseLeaderLease(clientExecutor(client), this.key, this.workerId), 'releasing the lease');
    } catch {
      // The lease expires by itself within its ttl.
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
