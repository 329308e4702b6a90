import { RegisteredCompensation } from '../discovery/workflow.registry';
import { CompensationTimeoutError } from '../domain/errors';
import { runAttempt } from './attempt';
import { retryDelayMs } from './backoff';
import { sleep } from '../util/sleep';
import { DuraflowClock } from '../domain/engine-clock';

export interface CompensationCall {
  compensation: RegisteredCompensation;
  /** The step's saved output, as JSON gave it back. */
  output: unknown;
  runId: string;
  workflowName: string;
  stepKey: string;
  /** Stops the compensation (and its retries) when the rollback's owner loses the task. */
  signal: AbortSignal;
  /** Attempts to make at most; default: the compensation's retries + 1. */
  maxAttempts?: number;
  /** Awaited before each attempt starts (the lease confirms itself if old); an attempt starts only if `signal` has not aborted by then. */
  beforeAttempt?: () => Promise<void>;
  /** The engine's clock a retry's backoff waits on; default the system's timers. */
  clock?: DuraflowClock;
}

export type CompensationResult = { ok: true; attempts: number } | { ok: false; error: unknown; attempts: number };

/**
 * Runs a compensation with its timeout per attempt and its retries (with backoff). Resolves
 * with the outcome; rejects only when `signal` aborted (the rollback stopped: nothing to record).
 */
export async function runCompensation(call: CompensationCall): Promise<CompensationResult> {
  const { compensation, signal } = call;
  const { timeout, retries, backoff } = compensation.options;
  const maxAttempts = call.maxAttempts ?? retries + 1;
  for (let attempt = 1; ; attempt++) {
    await call.beforeAttempt?.();
    if (signal.aborted) throw signal.reason;
    try {
      await runAttempt(
        (handle) =>
          compensation.fn(call.output, {
            runId: call.runId,
            workflowName: call.workflowName,
            stepKey: call.stepKey,
            get signal() {
              return handle.signal;
            },
            attempt,
          }),
        signal,
        timeout,
        () => new CompensationTimeoutError(call.stepKey, timeout!, attempt),
      );
      return { ok: true, attempts: attempt };
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      if (attempt >= maxAttempts) return { ok: false, error, attempts: attempt };
      const delayMs = retryDelayMs(backoff, attempt);
      await (call.clock ? call.clock.sleep(delayMs, signal) : sleep(delayMs, signal));
    }
  }
}
