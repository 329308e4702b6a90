import { Injectable, Logger } from '@nestjs/common';
import { DuraflowDatabase } from '../persistence/duraflow-database';
import { rollUpTaskStats } from '../persistence/sql/task-stats';
import { describeError } from '../util/describe-error';

/** How often the leader looks for a finished hour to add. */
const ROLLUP_EVERY_MS = 60_000;
/** Statements (of up to 24 hours each) one pass sends at most; a longer backlog goes on at the next tick. */
const MAX_STATEMENTS_PER_PASS = 8;

/**
 * The hourly rollup behind the dashboard's overview (persistence/sql/task-stats.ts), kept by the
 * reaper's leader after its pass: every minute it adds the hours that ended. States: idle (not
 * due) -> rolling (statements while hours are left, up to MAX_STATEMENTS_PER_PASS) -> idle, or
 * backlog (due again at the next tick). A failure is logged once and tried at the next tick; the
 * overview stays right meanwhile, reading the tasks themselves after the last hour rolled up.
 */
@Injectable()
export class TaskStatsRollup {
  private readonly logger = new Logger('Duraflow');
  private lastPassAt = 0;
  private backlog = false;
  private failing = false;

  constructor(private readonly db: DuraflowDatabase) {}

  due(now = Date.now()): boolean {
    return this.backlog || now - this.lastPassAt >= ROLLUP_EVERY_MS;
  }

  /** One pass now; true when hours are left for the next. Throws when a statement fails. */
  async rollUp(now = new Date()): Promise<boolean> {
    let more = true;
    for (let statements = 0; more && statements < MAX_STATEMENTS_PER_PASS; statements++) {
      more = await this.db.transaction(async (executor) => (await rollUpTaskStats(executor, now)).more);
    }
    this.backlog = more;
    this.lastPassAt = now.getTime();
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
      this.lastPassAt = Date.now();
      if (!this.failing) this.logger.warn(`The task statistics rollup failed (${describeError(error).message}); retrying in a minute`);
      this.failing = true;
    }
  }
}
