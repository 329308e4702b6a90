import { LoggerService } from '@nestjs/common';
import type { SqlExecutor } from '../persistence/duraflow-database';
import { LeaderFence } from '../persistence/lifecycle/leader-fence';

/**
 * Who runs the reaper. Followers try again on every tick, so a dead leader is replaced as
 * soon as its claim lapses, not only when a node boots.
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
  /**
   * What the reap statement checks in the database to act only while this node still leads
   * (LeaderFence); undefined when it does not lead. `db` is the database the reap runs on.
   * May reject during an outage: then do not reap.
   */
  fence(db: SqlExecutor): Promise<LeaderFence | undefined>;
  /** Gives leadership up (only if this node still holds it) and closes the connection. Never throws; idempotent. */
  close(): Promise<void>;
}

/** What the elections log through: Nest's `Logger`, or anything shaped like it. */
export type LeaderElectionLogger = Pick<LoggerService, 'log' | 'warn'>;

const LEADER_APPLICATION_NAME_PREFIX = 'duraflow-leader ';

/**
 * The `application_name` of the session of the PostgreSQL leader election's connection (its lease row's holder_pid):
 * `duraflow-leader <worker id>`, cut to the 63 characters PostgreSQL keeps.
 */
export function reaperLeaderApplicationName(workerId: string): string {
  return `${LEADER_APPLICATION_NAME_PREFIX}${workerId}`.slice(0, 63);
}

/** The worker id in such an `application_name` (possibly cut short), or undefined for another session. */
export function workerIdOfLeaderSession(applicationName: string | null | undefined): string | undefined {
  return applicationName?.startsWith(LEADER_APPLICATION_NAME_PREFIX)
    ? applicationName.slice(LEADER_APPLICATION_NAME_PREFIX.length)
    : undefined;
}
