import { Injectable, Logger } from '@nestjs/common';
import { DuraflowDatabase } from '../persistence/duraflow-database';
import { lastClosedHour, rollUpTaskStats } from '../persistence/sql/task-stats';
import { describeError } from '../util/describe-error';

/** How soon the leader tries again after a failed pass. */
const RETRY_AFTER_MS = 60_000;
/** Statements (of up to 24 hours each) one pass sends at most; a longer backlog goes on at the next tick. */
const MAX_STATEMENTS_PER_PASS = 8;

/**
 * The hourly rollup behind the dashboard's overview (persistence/sql/task-stats.ts), kept by the
 * reaper's leader after its pass: it adds the hours that ended. A pass is due once at boot and
 * then only when an hour closed after the one this node last saw rolled up (another node may
 * have rolled it meanwhile: the pass then finds nothing to add), so an idle leader sends no
 * statement for it in the other 59 minutes. States: idle (not due) -> rolling (statements while
 * hours are left, up to MAX_STATEMENTS_PER_PASS) -> idle, or backlog (due again at the next
 * tick). A failure is logged once and tried a minute later; the overview stays right meanwhile,
 * reading the tasks themselves after the last hour rolled up.
 */
@Injectable()
export class TaskStatsRollup {
  private readonly logger = new Logger('Duraflow');
  /** Where the rollup stood after this node's last pass (null before the first). */
  private rolledUntil: number | null = null;
  private failedAt = 0;
  private backlog = false;
  private failing = false;

  constructor(private readonly db: DuraflowDatabase) {}

  due(now = Date.now()): boolean {
    if (this.failing) return now - this.failedAt >= RETRY_AFTER_MS;
    return this.backlog || this.rolledUntil === null || lastClosedHour(new Date(now)) > this.rolledUntil;
  }

  /** One pass now; true when hours are left for the next. Throws when a statement fails. */
  async rollUp(now = new Date()): Promise<boolean> {
    let more = true;
    for (let statements = 0; more && statements < MAX_STATEMENTS_PER_PASS; statements++) {
      const pass = await this.db.transaction((executor) => rollUpTaskStats(executor, now));
      more = pass.more;
      this.rolledUntil = pass.rolledUntil.getTime();
    }
    this.backlog = more;
    return more;
  }

  /** The leader's call: a pass when due; never throws. */
  async rollUpIfDue(): Promise<void> {
    if (!this.due()) return;
    try {
      await this.rollUp();
      if (this.failing) this.logger.log('The task statistics rollup works again');
      this.failing = false;
    } catch (error) {
      this.failedAt = Date.now();
      if (!this.failing) this.logger.warn(`The task statistics rollup failed (${describeError(error).message}); retrying in a minute`);
      this.failing = true;
    }
  }
}
