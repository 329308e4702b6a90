import { Logger } from '@nestjs/common';
import type { SqlExecutor } from '../persistence/duraflow-database';
import { describeError } from '../util/describe-error';
import { LeaderFence } from '../persistence/lifecycle/leader-fence';
import { LeaderElection, LeaderElectionLogger } from './leader-election';

/**
 * What both elections share: one tick at a time, no tick once closing, a close that waits for
 * the tick in flight and runs once, an outage logged once (and its end once), and each change
 * of leadership logged once. An election says how it holds or takes leadership, and how it
 * gives it up.
 */
export abstract class BaseLeaderElection implements LeaderElection {
  abstract readonly kind: 'redis' | 'postgres';
  protected readonly logger: LeaderElectionLogger;
  /** What the last tick concluded, to log changes of leadership once. */
  protected leading = false;
  private unreachable = false;
  private ticking: Promise<boolean> | undefined;
  private closing: Promise<void> | undefined;

  protected constructor(
    /** The backing store, as the logs name it. */
    private readonly store: 'Redis' | 'PostgreSQL',
    logger: LeaderElectionLogger | undefined,
  ) {
    this.logger = logger ?? new Logger('Duraflow');
  }

  abstract isLeader(): boolean;

  abstract fence(db: SqlExecutor): Promise<LeaderFence | undefined>;

  tick(): Promise<boolean> {
    if (this.closing) return Promise.resolve(false);
    this.ticking ??= this.holdOrAcquire().finally(() => (this.ticking = undefined));
    return this.ticking;
  }

  close(): Promise<void> {
    this.closing ??= (this.ticking?.catch(() => undefined) ?? Promise.resolve()).then(() => this.release());
    return this.closing;
  }

  /** One try to become or stay leader; never throws (an outage is `noteOutage`, and means not leader). */
  protected abstract holdOrAcquire(): Promise<boolean>;

  /** Gives leadership up if this node holds it, and closes the connection. Never throws. */
  protected abstract release(): Promise<void>;

  /** The message of a change of leadership. */
  protected abstract leadershipChanged(leading: boolean): string;

  protected get closed(): boolean {
    return this.closing !== undefined;
  }

  /** Logs once per outage: `what` went wrong, and that this node does not reap meanwhile. */
  protected noteOutage(what: string, error: unknown): void {
    if (this.unreachable) return;
    this.unreachable = true;
    this.logger.warn(`Reaper leader election: ${what} (${describeError(error).message}); this node does not reap until it is back`);
  }

  /** The store answered: logs the end of an outage, once. */
  protected noteReachable(): void {
    if (!this.unreachable) return;
    this.unreachable = false;
    this.logger.log(`Reaper leader election: ${this.store} is reachable again`);
  }

  /** Logs a change of leadership, once. */
  protected setLeading(leading: boolean): void {
    if (leading === this.leading) return;
    this.leading = leading;
    this.logger.log(this.leadershipChanged(leading));
  }
}
