import { Inject, Injectable, Logger } from '@nestjs/common';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { RETENTION_STATUSES, ResolvedDuraflowOptions } from '../config/resolved-options';
import { RetentionCounts, RetentionStats } from '../domain/retention-stats';
import { TaskStatus } from '../domain/task-status';
import { ExpiryRule } from '../persistence/lifecycle/delete-expired-tasks';
import { TaskTransitions } from '../persistence/lifecycle/task-transitions';

const STATUS_OF: Record<keyof RetentionCounts, TaskStatus> = {
  completed: TaskStatus.COMPLETED,
  failed: TaskStatus.FAILED,
  rolledBack: TaskStatus.ROLLED_BACK,
  cancelled: TaskStatus.CANCELLED,
};

/** Batches one sweep sends at most; a backlog larger than that goes on at the reaper's next tick. */
const MAX_BATCHES_PER_SWEEP = 20;

/**
 * Retention: removes finished tasks older than their status's `retention` (and their step
 * runs), in batches of `retention.batchSize` per status, one short statement each. Run by the
 * reaper's leader after its pass, every `retention.intervalMs`, or at its next tick while a
 * backlog is left. States: idle (no rule, or not due) -> sweeping (batches while they come back
 * full, up to MAX_BATCHES_PER_SWEEP) -> idle, or backlog (due again at the next tick).
 */
@Injectable()
export class RetentionSweeper {
  private readonly logger = new Logger('Duraflow');
  private readonly rules: ExpiryRule[];
  private readonly removed: RetentionCounts = { completed: 0, failed: 0, rolledBack: 0, cancelled: 0 };
  private batches = 0;
  private lastSweepAt: Date | null = null;
  private backlog = false;

  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly transitions: TaskTransitions,
  ) {
    this.rules = RETENTION_STATUSES.flatMap((name) => {
      const keepMs = options.retention[name];
      return keepMs === undefined ? [] : [{ status: STATUS_OF[name], keepMs }];
    });
  }

  get enabled(): boolean {
    return this.rules.length > 0;
  }

  /** A sweep is due: rules exist, and the interval has passed or a backlog is left. */
  due(now = Date.now()): boolean {
    if (!this.enabled) return false;
    return this.backlog || !this.lastSweepAt || now - this.lastSweepAt.getTime() >= this.options.retention.intervalMs;
  }

  /** One sweep; returns what it removed. Throws when a statement fails (the caller logs it). */
  async sweep(): Promise<RetentionCounts> {
    const removed: RetentionCounts = { completed: 0, failed: 0, rolledBack: 0, cancelled: 0 };
    const { batchSize } = this.options.retention;
    let rules = this.rules;
    let batches = 0;
    while (rules.length && batches < MAX_BATCHES_PER_SWEEP) {
      const counts = await this.transitions.deleteExpired(rules, batchSize);
      batches++;
      this.batches++;
      for (const name of RETENTION_STATUSES) {
        const count = counts.get(STATUS_OF[name]) ?? 0;
        removed[name] += count;
        this.removed[name] += count;
      }
      // Only a status whose batch came back full may have more to remove.
      rules = rules.filter((rule) => (counts.get(rule.status) ?? 0) >= batchSize);
    }
    this.backlog = rules.length > 0;
    this.lastSweepAt = new Date();
    const total = removed.completed + removed.failed + removed.rolledBack + removed.cancelled;
    if (total) {
      this.logger.log(
        `Retention removed ${total} finished task(s) in ${batches} batch(es)` + (this.backlog ? '; more at the next tick' : ''),
      );
    }
    return removed;
  }

  stats(): RetentionStats {
    return { enabled: this.enabled, removed: { ...this.removed }, batches: this.batches, lastSweepAt: this.lastSweepAt };
  }
}
