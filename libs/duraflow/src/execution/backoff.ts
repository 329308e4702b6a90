import { ResolvedBackoff } from '../config/resolved-options';

/**
 * Delay before retry number `retry` (1-based): exponential, capped, with "equal jitter"
 * (half fixed, half random) so retries of many tasks spread out but never collapse to zero.
 */
export function retryDelayMs(backoff: ResolvedBackoff, retry: number): number {
  const exponential = Math.min(backoff.maxDelayMs, backoff.initialDelayMs * backoff.factor ** (retry - 1));
  return Math.round(exponential / 2 + Math.random() * (exponential / 2));
}
