import { InvalidDuraflowOptionsError } from '../domain/errors';
import { BackoffOptions, StepOptions } from '../domain/workflow-context';
import { checkInteger, checkTimer } from './option-checks';

export interface ResolvedBackoff {
  initialDelayMs: number;
  factor: number;
  maxDelayMs: number;
}

export interface ResolvedStepOptions {
  retries: number;
  timeout: number | undefined;
  backoff: ResolvedBackoff;
  /** Write the step's row `running` before each attempt (steps only; compensations ignore it). */
  recordStart: boolean;
}

export const DEFAULT_BACKOFF: ResolvedBackoff = { initialDelayMs: 100, factor: 2, maxDelayMs: 30_000 };

/** A compensation that hangs must not hold a rollback forever: 30 s, then it counts as failed. */
export const DEFAULT_COMPENSATION_OPTIONS: ResolvedStepOptions = {
  retries: 2,
  timeout: 30_000,
  backoff: DEFAULT_BACKOFF,
  recordStart: false,
};

/** Layers step options (call site over workflow over module) and checks the result. */
export function resolveStepOptions(options: StepOptions | undefined, base: ResolvedStepOptions, where: string): ResolvedStepOptions {
  const backoff: BackoffOptions = options?.backoff ?? {};
  const resolved: ResolvedStepOptions = {
    retries: options?.retries ?? base.retries,
    timeout: options?.timeout ?? base.timeout,
    recordStart: options?.recordStart ?? base.recordStart,
    backoff: {
      initialDelayMs: backoff.initialDelayMs ?? base.backoff.initialDelayMs,
      factor: backoff.factor ?? base.backoff.factor,
      maxDelayMs: backoff.maxDelayMs ?? base.backoff.maxDelayMs,
    },
  };
  checkInteger(`${where}.retries`, resolved.retries, 0);
  if (resolved.timeout !== undefined) checkTimer(`${where}.timeout`, resolved.timeout, 1);
  if (typeof resolved.recordStart !== 'boolean') throw new InvalidDuraflowOptionsError(`${where}.recordStart`, 'must be true or false.');
  checkTimer(`${where}.backoff.initialDelayMs`, resolved.backoff.initialDelayMs, 0);
  checkTimer(`${where}.backoff.maxDelayMs`, resolved.backoff.maxDelayMs, 0);
  if (!(typeof resolved.backoff.factor === 'number' && resolved.backoff.factor >= 1)) {
    throw new InvalidDuraflowOptionsError(`${where}.backoff.factor`, 'must be a number >= 1.');
  }
  return resolved;
}
