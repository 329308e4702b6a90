import { ResolvedBackoff } from '../duraflow.options';

/**
 * Delay before retry number `retry` (1-based): exponential, capped, with "equal jitter"
 * (half fixed, half random) so retries of many tasks spread out but never collapse to zero.
 */
export function retryDelayMs(backoff: ResolvedBackoff, retry: number): number {
  const exponential = Math.min(backoff.maxDelayMs, backoff.initialDelayMs * backoff.factor ** (retry - 1));
  return Math.round(exponential / 2 + Math.random() * (exponential / 2));
}

/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
