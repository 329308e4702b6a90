import { describeError } from '../util/describe-error';

/** Where a compensation failed: its step, its name, the attempts it was given. */
export interface DeadLetterPlace<V = never> {
  stepKey: string | V;
  compensationFn: string | null | V;
  /** Attempts made by the writer of this error (0 when none ran). */
  attempt: number | V;
  /** Set by a retry from the queue: its number (1 for the first). */
  retry?: number | V;
}

/** What `dead_letter_queue.error` holds: the failure as describeError gives it, where it happened, and when. */
export type DeadLetterError = ReturnType<typeof describeError> & DeadLetterPlace & { failedAt: string };

/** The keys of a dead letter's error, in one place for the two writers (this process, and SQL). */
function deadLetterFields<V>(failure: Record<string, V | undefined>, place: DeadLetterPlace<V>, failedAt: V) {
  return { ...failure, ...place, failedAt };
}

/** A compensation's failure as `dead_letter_queue.error` stores it. */
export function deadLetterError(error: unknown, place: DeadLetterPlace): DeadLetterError {
  return deadLetterFields(describeError(error), place, new Date().toISOString()) as DeadLetterError;
}

/**
 * The same object built by a statement (the reaper's, for compensations it gives up on), each
 * value an SQL expression; `failedAt` is the statement's time, written as `toISOString()` writes it.
 */
export function deadLetterErrorSql(failure: { code: string; name: string; message: string }, place: DeadLetterPlace<string>): string {
  const fields = deadLetterFields<string>(failure, place, `to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`);
  const pairs = Object.entries(fields).filter(([, value]) => value !== undefined);
  return `jsonb_build_object(${pairs.map(([key, value]) => `'${key}', ${value}`).join(', ')})`;
}
