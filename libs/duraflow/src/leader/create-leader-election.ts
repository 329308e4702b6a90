import { Client } from 'pg';
import { DuraflowRedisOptions } from '../config/duraflow.options';
import { LeaderElection, LeaderElectionLogger } from './leader-election';
import { PostgresLeaderElection } from './postgres-leader-election';
import { RedisLeaderElection } from './redis-leader-election';

export interface LeaderElectionOptions {
  /** With it, the leader holds a Redis key; without it, a lease row in PostgreSQL (duraflow_leader). */
  redis?: DuraflowRedisOptions;
  /** For PostgreSQL: a new, unconnected client for the election's own connection. */
  createClient: () => Client | Promise<Client>;
  /** Default `duraflow:reaper:leader`. */
  key?: string;
  /** The Redis key's value (the lease row's holder) while this node leads. */
  workerId: string;
  /** The Redis key's (the lease row's) time-to-live: a frozen or dead leader is replaced within it. */
  ttlMs: number;
  logger?: LeaderElectionLogger;
}

export function createLeaderElection(options: LeaderElectionOptions): LeaderElection {
  const { redis, createClient, key, workerId, ttlMs, logger } = options;
  return redis
    ? new RedisLeaderElection({ redis, key, workerId, ttlMs, logger })
    : new PostgresLeaderElection({ createClient, key, workerId, ttlMs, logger });
}
