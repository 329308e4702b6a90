/**
 * Waiting in tests and in the bench: for a condition that holds eventually (polled, with a bound
 * that is a failure's deadline, never an assertion on time), or for a fixed while.
 */

export interface EventuallyOptions<T> {
  /** Past this, it fails saying what it waited for. Default 20 s: room for a loaded machine. */
  timeoutMs?: number;
  /** Default 20 ms. */
  everyMs?: number;
  /** When the value `check` resolves with is the awaited one. Default: a truthy value. */
  until?: (value: T) => boolean;
}

/**
 * Calls `check` every `everyMs` until its value is the awaited one, and resolves with that value;
 * past `timeoutMs` it rejects with `what` and the last value seen. An error `check` throws ends
 * the wait at once.
 */
export async function eventually<T>(what: string, check: () => T | Promise<T>, options: EventuallyOptions<T> = {}): Promise<T> {
  const { timeoutMs = 20_000, everyMs = 20, until = Boolean } = options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (until(value)) return value;
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting until ${what}${lastSeen(value)}`);
    await sleep(everyMs);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The last value, when it says more than "not yet". */
function lastSeen(value: unknown): string {
  if (value === undefined || value === null || typeof value === 'boolean') return '';
  const text = JSON.stringify(value) ?? String(value);
  return `; last seen: ${text.length > 500 ? `${text.slice(0, 500)}…` : text}`;
}
