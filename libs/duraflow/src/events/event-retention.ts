import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { DuraflowDatabase } from '../persistence/duraflow-database';
import { isReplayBoot } from '../replay/replay-boot';

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
      const { rows } = await this.db.query<{ events: number }>(
        `WITH expired AS (
           SELECT e.id FROM duraflow_published_events e
           WHERE e.created_at < now() - $1::interval
             AND NOT EXISTS (SELECT 1 FROM duraflow_event_deliveries d JOIN duraflow_event_groups g ON g.id = d.group_id
                             WHERE d.event_id = e.id AND g.started_at IS NULL)
           ORDER BY e.created_at LIMIT $2 FOR UPDATE SKIP LOCKED
         ), events AS (
           DELETE FROM duraflow_published_events WHERE id IN (SELECT id FROM expired) RETURNING id
         ), groups AS (
           DELETE FROM duraflow_event_groups WHERE id IN (
             SELECT id FROM duraflow_event_groups WHERE started_at < now() - $1::interval LIMIT $2 FOR UPDATE SKIP LOCKED)
         )
         SELECT count(*)::int AS events FROM events`,
        [retention, SWEEP_BATCH],
        'duraflow_delete_expired_events',
      );
      deleted += rows[0].events;
      if (rows[0].events < SWEEP_BATCH) return deleted;
    }
  }
}
