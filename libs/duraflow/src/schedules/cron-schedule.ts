import { Cron } from 'croner';

/**
 * A cron expression read in a time zone, by croner (seconds field, IANA zones, DST: a time in
 * the spring-forward gap runs at the first time after it, a repeated autumn time once). Only
 * computes times: croner's own timers are never started, the ticker arms its own.
 */
export class CronSchedule {
  private readonly cron: Cron;

  /** @throws croner's Error for a pattern or a time zone it cannot read */
  constructor(
    readonly expression: string,
    readonly timezone: string,
  ) {
    this.cron = new Cron(expression, { timezone, mode: '5-or-6-parts' });
  }

  /** The first tick strictly after `after`; null when the expression has none. */
  nextAfter(after: Date): Date | null {
    return this.cron.nextRun(after);
  }

  /**
   * The newest `limit` ticks in (`after`, `upTo`], oldest first. `after` null: no lower bound.
   * Counted back from `upTo`, so a long gap costs `limit` steps, not one per tick in it.
   */
  ticksBetween(after: Date | null, upTo: Date, limit: number): Date[] {
    // previousRuns excludes a run at its reference's exact millisecond: 1 ms later includes `upTo`.
    const newestFirst = this.cron.previousRuns(limit, new Date(upTo.getTime() + 1));
    return newestFirst.filter((tick) => after === null || tick.getTime() > after.getTime()).reverse();
  }
}

/** True when `timezone` is an IANA zone this Node.js (its ICU data) knows. */
export function isKnownTimezone(timezone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
    return true;
  } catch {
    return false;
  }
}
