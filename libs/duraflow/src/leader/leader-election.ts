import { LoggerService } from '@nestjs/common';

/** The key (Redis) or advisory-lock name (PostgreSQL) the reaper's leader holds: the seeds' key. */
export const REAPER_LEADER_KEY = 'duraflow:reaper:leader';

/**
 * Who runs the reaper. Followers try again on every tick, so a dead leader is replaced as
 * soon as its claim lapses (the seeds' engine tried once at boot and never again).
 */
export interface LeaderElection {
  readonly kind: 'redis' | 'postgres';
  /**
   * Tries to become leader, or to stay leader. Never throws: an outage of the backing store
   * means "not leader" (logged once per outage, and once when it is over). Resolves to `isLeader()`.
   */
  tick(): Promise<boolean>;
  /** True only while this node's leadership is certainly still valid, judged locally. */
  isLeader(): boolean;
  /** Gives leadership up (only if this node still holds it) and closes the connection. Never throws; idempotent. */
  close(): Promise<void>;
}

/** What the elections log through: Nest's `Logger`, or anything shaped like it. */
export type LeaderElectionLogger = Pick<LoggerService, 'log' | 'warn'>;
