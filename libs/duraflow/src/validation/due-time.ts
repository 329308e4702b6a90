/**
 * The times a task may be due at: a submit's `scheduledAt`, a sleep's wake-up, a signal wait's
 * deadline. PostgreSQL stores timestamps well past year 9999, but JavaScript, the drivers and
 * ISO-8601 text do not all agree past it, and a due time there is never meant: the library's own
 * "no wake-up" is 9999-12-31T00:00:00Z (persistence/lifecycle/settle-wait.ts NO_WAKE_UP), the
 * latest time accepted here.
 */
export const EARLIEST_DUE_TIME = new Date('0001-01-01T00:00:00.000Z');
export const LATEST_DUE_TIME = new Date('9999-12-31T00:00:00.000Z');

/** Whether `time` is a valid date from year 1 to 9999-12-31T00:00:00Z. */
export function isAcceptedDueTime(time: Date): boolean {
  const ms = time.getTime();
  return !Number.isNaN(ms) && ms >= EARLIEST_DUE_TIME.getTime() && ms <= LATEST_DUE_TIME.getTime();
}

/** What the errors say about the accepted range. */
export const DUE_TIME_RANGE = `from ${EARLIEST_DUE_TIME.toISOString()} to ${LATEST_DUE_TIME.toISOString()}`;
