import { isTransientDatabaseError } from '../persistence/transient-error';
import { sleep } from '../util/sleep';

export interface PersistOptions {
  /** Give up (rethrow) once this long has passed since the first failure. */
  giveUpAfterMs: number;
  /** Stop retrying at once when this aborts (the run was cancelled or lost). */
  signal: AbortSignal;
}

/**
 * Runs a statement, retrying it while the database is unreachable, with a capped backoff, for
 * up to `giveUpAfterMs`. Safe for writes because each is fenced on the claim: a write that
 * lands late lands only if the claim still owns the task. Other errors are rethrown at once.
 */
export async function persist<T>(write: () => Promise<T>, options: PersistOptions): Promise<T> {
  const started = Date.now();
  for (let retry = 0; ; retry++) {
    try {
      return await write();
    } catch (error) {
      if (!isTransientDatabaseError(error) || Date.now() - started >= options.giveUpAfterMs || options.signal.aborted) throw error;
      const delay = Math.min(2_000, 50 * 2 ** Math.min(retry, 6));
      try {
        await sleep(Math.min(delay, Math.max(1, options.giveUpAfterMs - (Date.now() - started))), options.signal);
      } catch {
        throw error;
      }
    }
  }
}
