import { InvalidDuraflowOptionsError } from '../domain/errors';

/** The checks the options' resolution applies: each refusal names the option and what it takes. */

export function checkInteger(option: string, value: unknown, min: number, orElse?: string): void {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw new InvalidDuraflowOptionsError(option, `must be an integer >= ${min}${orElse ? ` ${orElse}` : ''}, got ${String(value)}.`);
  }
}

/**
 * A step's timeout and its retries' delays are timers of the running process: Node fires a timer
 * set beyond 2^31 - 1 ms (24.8 days) after 1 ms, which would time out every attempt at once.
 * Longer waits are durable: ctx.sleep.
 */
const MAX_TIMER_MS = 2_147_483_647;

export function checkTimer(option: string, value: unknown, min: number): void {
  checkInteger(option, value, min);
  if ((value as number) > MAX_TIMER_MS) {
    throw new InvalidDuraflowOptionsError(
      option,
      `must be at most ${MAX_TIMER_MS} ms (24.8 days), got ${String(value)}: wait longer with ctx.sleep, which is durable.`,
    );
  }
}

export function checkText(option: string, value: unknown, maxLength: number): void {
  if (typeof value !== 'string' || value.length === 0 || value.length > maxLength) {
    throw new InvalidDuraflowOptionsError(option, `must be a non-empty string of at most ${maxLength} characters.`);
  }
}
