import { Inject, Injectable, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { ReaperLoop } from '../background/reaper-loop';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { isReplayBoot } from '../replay/replay-boot';
import { ReapResult } from '../domain/reap-result';
import { RetentionCounts, RetentionStats } from '../domain/retention-stats';
import { RetentionSweeper } from '../background/retention-sweeper';

export { REAPER_INTERVAL_NAME } from '../domain/duraflow.constants';
export type { ReapResult } from '../domain/reap-result';
export type { RetentionCounts, RetentionStats } from '../domain/retention-stats';

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
    private readonly retention: RetentionSweeper,
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
    // The replay check boots the host's module to read its workflows: it must never claim or reap.
    if (this.options.reaper.enabled && !isReplayBoot()) this.start();
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

  /**
   * One retention sweep now, on any node (leader or not): finished tasks older than their
   * status's `retention` go, in batches. Nothing when no status has a retention.
   */
  removeExpiredTasks(): Promise<RetentionCounts> {
    return this.retention.sweep();
  }

  /** What retention removed on this node (its leader runs it), counted per status. */
  retentionStats(): RetentionStats {
    return this.retention.stats();
  }

  /** One reaping pass over tasks stale for longer than `reaper.staleAfterMs`, on any node (leader or not). */
  reapOnce(): Promise<ReapResult> {
    return this.loop.reapOnce();
  }
}
