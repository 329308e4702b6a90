import { sleep } from '../util/sleep';

/** Error codes and messages of a database that went away (as opposed to a statement that is wrong). */
const TRANSIENT_SQLSTATE = /^(08|57P0[123]|53300|40001|40P01)/;
const TRANSIENT_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
const TRANSIENT_MESSAGE = /connection terminated|terminating connection|connection (?:ended|closed)|not queryable|timeout exceeded when trying to connect|Client has encountered a connection error/i;

/** True for errors that say "the database could not be reached", which a retry may fix. */
export function isTransientDatabaseError(error: unknown): boolean {
  if (!error || typeof error !== 'object') return false;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && (TRANSIENT_SQLSTATE.test(code) || TRANSIENT_NODE_CODES.has(code))) return true;
  return typeof message === 'string' && TRANSIENT_MESSAGE.test(message);
}

export interface PersistOptions {
  /** Give up (rethrow) once this long has passed since the first failure. */
  giveUpAfterMs: number;
  /** Stop retrying at once when this aborts (the run was cancelled or lost). */
  signal?: AbortSignal;
}

/**
 * Runs a fenced write, retrying it while the database is unreachable, with a capped backoff,
 * for up to `giveUpAfterMs`. Safe because every such write is fenced on the claim: a write
 * that lands late lands only if the claim still owns the task. Other errors are rethrown at once.
 */
export async function persist<T>(write: () => Promise<T>, options: PersistOptions): Promise<T> {
  const started = Date.now();
  for (let retry = 0; ; retry++) {
    try {
      return await write();
    } catch (error) {
      if (!isTransientDatabaseError(error) || Date.now() - started >= options.giveUpAfterMs || options.signal?.aborted) throw error;
      const delay = Math.min(2_000, 50 * 2 ** Math.min(retry, 6));
      try {
        await sleep(Math.min(delay, Math.max(1, options.giveUpAfterMs - (Date.now() - started))), options.signal ?? new AbortController().signal);
      } catch {
        throw error;
      }
    }
  }
}
