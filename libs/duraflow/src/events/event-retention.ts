import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { DuraflowDatabase } from '../persistence/duraflow-database';
import { isReplayBoot } from '../replay/replay-boot';
import { PublishedEventStore } from './published-event.store';

/**
 * How often a node deletes the events past `events.retentionMs` (the first time: this long after
 * boot). Retention is counted in days; a sweep every 15 minutes keeps an idle node's statements
 * to what its worker and reaper need (a transaction a minute here was a tenth of them).
 */
const SWEEP_EVERY_MS = 15 * 60_000;
/** Rows deleted per statement: short transactions, whatever the backlog. */
const SWEEP_BATCH = 1_000;

/**
 * Published events (with their deliveries) and started debounces and batches older than
 * `events.retentionMs` are deleted, on every node whose worker runs, in batches picked
 * FOR UPDATE SKIP LOCKED (two nodes sweeping never wait for each other). A group still to start
 * is never deleted, nor are the events it holds (their deliveries point at it).
 */
@Injectable()
export class EventRetention implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Duraflow');
  private timer: NodeJS.Timeout | undefined;
  private sweep: Promise<unknown> | undefined;

  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly db: DuraflowDatabase,
    private readonly events: PublishedEventStore,
  ) {}

  onApplicationBootstrap(): void {
    if (!this.options.worker.enabled || isReplayBoot()) return;
    this.timer = setInterval(() => {
      this.sweep ??= this.deleteExpired()
        .catch((error) => this.logger.warn(`Could not delete expired events (${String(error?.message ?? error)}); retrying later.`))
        .finally(() => (this.sweep = undefined));
    }, SWEEP_EVERY_MS);
    this.timer.unref?.();
  }

  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    await this.sweep;
  }

  /** Deletes what is past retention now; how many events it deleted. */
  async deleteExpired(): Promise<number> {
    const retention = `${this.options.events.retentionMs} milliseconds`;
    let deleted = 0;
    for (;;) {
      const events = await this.events.deleteExpired(this.db, retention, SWEEP_BATCH);
      deleted += events;
      if (events < SWEEP_BATCH) return deleted;
    }
  }
}
