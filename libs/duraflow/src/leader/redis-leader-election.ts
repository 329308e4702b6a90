import { performance } from 'node:perf_hooks';
import type { Redis, RedisOptions } from 'ioredis';
import { loadIoredis } from '../dependencies/optional-dependencies';
import { DuraflowRedisOptions } from '../config/duraflow.options';
import { REAPER_LEADER_KEY } from '../domain/duraflow.constants';
import type { SqlExecutor } from '../persistence/duraflow-database';
import { BaseLeaderElection } from './base-leader-election';
import { LeaderFence } from '../persistence/lifecycle/leader-fence';
import { LeaderElectionLogger } from './leader-election';

/** Extends the key's life only while this node holds it: after an expiry another node may have it. */
const RENEW_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`;

/** Deletes the key only while this node holds it, never another node's leadership. */
const RELEASE_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`;

/** The key's remaining life in ms while it holds this node's value; -2 otherwise. */
const HELD_FOR_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PTTL', KEYS[1])
end
return -2`;

/** The longest wait between two reconnection attempts while Redis is away. */
const MAX_RECONNECT_DELAY_MS = 2_000;

export interface RedisLeaderElectionOptions {
  /** Where Redis is; fields given next to `url` fill in what the url leaves out. */
  redis: DuraflowRedisOptions;
  /** Default `duraflow:reaper:leader`. */
  key?: string;
  /** The value the leader writes under the key. */
  workerId: string;
  /** Lifetime of the key; the leader must tick again well within it to stay leader. */
  ttlMs: number;
  logger?: LeaderElectionLogger;
}

/**
 * Leader election on one Redis key: `SET key <worker-id> NX PX ttl` to take it, a
 * compare-and-set to renew it, a compare-and-delete to give it up. Leadership is judged
 * locally from the time the last successful command was *sent*, minus a safety margin, so
 * this node stops believing it leads before Redis can hand the key to anyone else.
 */
export class RedisLeaderElection extends BaseLeaderElection {
  readonly kind = 'redis';
  readonly key: string;
  /** The key's value while this node leads. */
  readonly workerId: string;
  private readonly ttlMs: number;
  /** Covers clock-rate drift between this process and Redis. */
  private readonly safetyMarginMs: number;
  private readonly client: Redis;
  /** `performance.now()` until which this node certainly holds the key; 0 when it does not. */
  private validUntil = 0;

  constructor(options: RedisLeaderElectionOptions) {
    super('Redis', options.logger);
    this.key = options.key ?? REAPER_LEADER_KEY;
    this.workerId = options.workerId;
    this.ttlMs = options.ttlMs;
    this.safetyMarginMs = Math.min(1_000, Math.ceil(options.ttlMs / 10));
    this.client = createClient(options.redis, options.ttlMs);
    // Connection errors surface as failed ticks; without a listener ioredis would print each one.
    this.client.on('error', () => undefined);
  }

  isLeader(): boolean {
    return performance.now() < this.validUntil;
  }

  protected async holdOrAcquire(): Promise<boolean> {
    try {
      if (this.client.status === 'wait' || this.client.status === 'end') await this.client.connect();
      const sentAt = performance.now();
      // The usual case first (a leader renews, a follower tries to take the key), the other
      // one second: the key may have expired under a slow leader, or hold this node's id
      // although the reply that granted it was lost.
      const held = this.leading ? (await this.renew()) || (await this.acquire()) : (await this.acquire()) || (await this.renew());
      this.validUntil = held ? sentAt + this.ttlMs - this.safetyMarginMs : 0;
      this.noteReachable();
    } catch (error) {
      // The key may outlive the outage, but nothing proves it: not leader until a command succeeds.
      this.validUntil = 0;
      this.noteOutage('Redis is unreachable', error);
    }
    this.setLeading(this.isLeader());
    return this.isLeader();
  }

  /**
   * The fence of a reaping pass: a moment, in the database's clock, until which this node
   * certainly holds the key; the reap statement does nothing once the database's clock has
   * passed it. Why it is safe, with local times read from the monotonic clock:
   * 1. ask the database for its clock, D, sent at a0 and answered at a1: D was read at some
   *    local time r <= a1, so at any later local time x the database's clock reads at least
   *    D + (x - a1);
   * 2. then ask Redis, at local b >= a1, whether the key still holds this node's id and for how
   *    long, p ms: Redis measured p when it ran the script, after b, so the key lives at least
   *    until local b + p;
   * 3. at local b + p the database's clock reads at least D + (b - a1) + p: a deadline there
   *    (minus the safety margin for clock-rate drift) is passed only after the key may have
   *    expired. A pass delayed past it (this process frozen after the check, a slow network)
   *    reaps nothing; a pass that runs before it runs while the key was still ours.
   * Undefined when the key no longer holds this node's id.
   */
  async fence(db: SqlExecutor): Promise<LeaderFence | undefined> {
    if (!this.isLeader()) return undefined;
    const { rows } = await db.query<{ now_ms: number }>(
      `SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::float8 AS now_ms`,
      [],
      'duraflow_leader_clock',
    );
    const answeredAt = performance.now();
    const askedRedisAt = performance.now();
    const heldForMs = Number(await this.client.eval(HELD_FOR_SCRIPT, 1, this.key, this.workerId));
    if (!(heldForMs > this.safetyMarginMs)) return undefined;
    return {
      kind: 'deadline',
      deadlineEpochMs: Math.floor(rows[0].now_ms + (askedRedisAt - answeredAt) + heldForMs - this.safetyMarginMs),
    };
  }

  private async acquire(): Promise<boolean> {
    return (await this.client.set(this.key, this.workerId, 'PX', this.ttlMs, 'NX')) === 'OK';
  }

  private async renew(): Promise<boolean> {
    return (await this.client.eval(RENEW_SCRIPT, 1, this.key, this.workerId, this.ttlMs)) === 1;
  }

  protected leadershipChanged(leading: boolean): string {
    return leading
      ? `Reaper leader election: this node (${this.workerId}) is the leader`
      : `Reaper leader election: this node (${this.workerId}) is no longer the leader`;
  }

  protected async release(): Promise<void> {
    this.validUntil = 0;
    this.leading = false;
    try {
      if (this.client.status === 'ready') {
        // Run even when this node thinks it follows: a lost reply may have left the key with its id.
        await this.client.eval(RELEASE_SCRIPT, 1, this.key, this.workerId).catch(() => undefined);
        await this.client.quit();
      }
    } catch {
      // quit failed: the connection is dropped below all the same.
    } finally {
      this.client.disconnect();
    }
  }
}

function createClient(redis: DuraflowRedisOptions, ttlMs: number): Redis {
  // A command must come back (or fail) well within a tick, whatever the ttl.
  const timeoutMs = Math.min(5_000, Math.max(500, Math.floor(ttlMs / 3)));
  const options: RedisOptions = {
    ...(redis.host !== undefined && { host: redis.host }),
    ...(redis.port !== undefined && { port: redis.port }),
    ...(redis.password !== undefined && { password: redis.password }),
    ...(redis.db !== undefined && { db: redis.db }),
    lazyConnect: true,
    // While Redis is away, commands fail at once instead of queueing behind the outage.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    commandTimeout: timeoutMs,
    connectTimeout: timeoutMs,
    retryStrategy: (attempt) => Math.min(MAX_RECONNECT_DELAY_MS, 50 * 2 ** Math.min(attempt, 6)),
  };
  // Loaded here, not at import: applications without the `redis` option need not install ioredis.
  const { Redis: RedisClient } = loadIoredis();
  return redis.url ? new RedisClient(redis.url, options) : new RedisClient(options);
}
