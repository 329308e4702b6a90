import { Inject, Injectable, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { ReaperLoop } from '../background/reaper-loop';
import { RESOLVED_DURAFLOW_OPTIONS } from '../duraflow.constants';
import { ResolvedDuraflowOptions } from '../duraflow.options';
import { ReapResult } from '../interfaces/reap-result';

export { REAPER_INTERVAL_NAME } from '../duraflow.constants';
export type { ReapResult } from '../interfaces/reap-result';

/**
 * Recovers the tasks of dead workers: running tasks whose heartbeat went stale
 * (background/reaper-loop.ts). On every tick each node tries to become or stay leader (Redis
 * key with a ttl, or a lease row in PostgreSQL without Redis); only the leader reaps, every
 * `reaper.intervalMs`.
 */
@Injectable()
export class ReaperService implements OnApplicationBootstrap, OnApplicationShutdown {
  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly loop: ReaperLoop,
  ) {}

  /** True while this node holds the reaper's leadership (judged locally, within the ttl). */
  isLeader(): boolean {
    return this.loop.isLeader();
  }

  /** How leadership is decided here: `redis` with a `redis` option, `postgres` (a lease row) without. */
  get electionKind(): 'redis' | 'postgres' | undefined {
    return this.loop.electionKind;
  }

  onApplicationBootstrap(): void {
    if (this.options.reaper.enabled) this.start();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.stop();
  }

  /** Starts ticking (called on bootstrap unless `reaper.enabled` is false). */
  start(): void {
    this.loop.start();
  }

  /** Stops ticking and gives leadership up (compare-and-delete in Redis, the lease row expired in PostgreSQL). */
  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One reaping pass over tasks stale for longer than `reaper.staleAfterMs`, on any node (leader or not). */
  reapOnce(): Promise<ReapResult> {
    return this.loop.reapOnce();
  }
}
