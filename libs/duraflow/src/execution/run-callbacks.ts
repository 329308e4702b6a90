import { CallbackTimeoutError, InvalidPrimitiveCallError, SignalTimeoutError } from '../domain/errors';
import { callbackSignalName, callbackStepKey } from '../domain/reserved-keys';
import { CallbackHandle, CallbackOptions, StepContext, StepOptions } from '../domain/workflow-context';
import { StepMemo } from '../persistence/step.store';
import { isAcceptedDueTime, LATEST_DUE_TIME } from '../validation/due-time';
import { RunKernel } from './run-kernel';

/** What a live run does for callbacks (live-run.ts); the replay check has none (it stops before an unrecorded step runs). */
export interface CallbackEffects {
  /** Opens the callback `key` (its row, fenced on the claim), expiring `timeoutMs` from now (undefined: never). */
  openCallback?(key: string, timeoutMs: number | undefined): Promise<CallbackHandle>;
  /** The wait of callback `callbackId` timed out: its row says `expired`. */
  callbackExpired?(callbackId: string): Promise<void>;
  /** A signal wait not settled in an earlier run, until `deadline` (null: none). */
  waitForSignal(key: string, name: string, deadline: Date | null, timeoutMs: number | undefined): Promise<unknown>;
}

type StepFn = <T>(key: string, fn: (step: StepContext) => T | Promise<T>, options?: StepOptions) => Promise<T>;

const MAX_CALLBACK_KEY_CHARS = 200;

/**
 * `ctx.createCallback` and `ctx.waitForCallback`. Opening a callback is a step (`callback:<key>`)
 * whose output is the handle: memoized as every step is, so a replay returns the same id and url.
 * Waiting for one is a signal wait for the callback's reserved signal name (its completion sends
 * that signal, lifecycle/complete-callback.ts), with the callback's expiry as its deadline: the
 * signal's suspension, waking, timeout and recovery, nothing of its own.
 */
export function callbackPrimitives(taskId: string, kernel: RunKernel, effects: CallbackEffects, step: StepFn) {
  const opened = new Map<string, CallbackHandle>();
  const waited = new Set<string>();

  const createCallback = async (key: string, options?: CallbackOptions): Promise<CallbackHandle> => {
    const timeoutMs = checkedTimeout(key, options);
    const handle = await step(
      callbackStepKey(key),
      () => {
        if (!effects.openCallback) throw new Error('This run cannot open callbacks');
        return effects.openCallback(key, timeoutMs);
      },
      { retries: 0, recordStart: false },
    );
    opened.set(handle.id, handle);
    return { ...handle };
  };

  const waitForCallback = async <T>(callback: CallbackHandle): Promise<T> => {
    const handle = opened.get((callback as { id?: unknown } | null)?.id as string);
    if (!handle) {
      throw new InvalidPrimitiveCallError(
        'ctx.waitForCallback(callback)',
        'pass the object ctx.createCallback returned earlier in this run.',
      );
    }
    if (waited.has(handle.id)) {
      throw new InvalidPrimitiveCallError(
        `ctx.waitForCallback("${handle.key}")`,
        'a run waits for a callback once; keep what the first wait returned.',
      );
    }
    waited.add(handle.id);
    const name = callbackSignalName(handle.id);
    const key = kernel.nextSignalWaitKey(name);
    const recorded = await kernel.enter(key, () => true);
    if (recorded?.status === 'completed') return savedOutput(recorded) as T;
    if (recorded?.status === 'failed') throw new CallbackTimeoutError(taskId, handle.key, handle.expiresAt);
    const deadline = recorded?.wakeAt ?? (handle.expiresAt === null ? null : new Date(handle.expiresAt));
    try {
      return (await effects.waitForSignal(key, name, deadline, deadline ? Math.max(0, deadline.getTime() - Date.now()) : undefined)) as T;
    } catch (error) {
      if (!(error instanceof SignalTimeoutError)) throw error;
      await effects.callbackExpired?.(handle.id);
      throw new CallbackTimeoutError(taskId, handle.key, handle.expiresAt);
    }
  };

  return { createCallback, waitForCallback };
}

function checkedTimeout(key: string, options: CallbackOptions | undefined): number | undefined {
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_CALLBACK_KEY_CHARS) {
    throw new InvalidPrimitiveCallError(
      `ctx.createCallback(${JSON.stringify(key)})`,
      `the key must be 1 to ${MAX_CALLBACK_KEY_CHARS} characters.`,
    );
  }
  const timeoutMs = options?.timeoutMs;
  if (timeoutMs === undefined) return undefined;
  if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs < 0) {
    throw new InvalidPrimitiveCallError(
      `ctx.createCallback("${key}")`,
      `timeoutMs must be a finite number >= 0, got ${String(timeoutMs)}.`,
    );
  }
  if (!isAcceptedDueTime(new Date(Date.now() + timeoutMs))) {
    throw new InvalidPrimitiveCallError(
      `ctx.createCallback("${key}")`,
      `timeoutMs ${timeoutMs} ends after ${LATEST_DUE_TIME.toISOString()}; leave timeoutMs out for a callback that never expires.`,
    );
  }
  return Math.ceil(timeoutMs);
}

function savedOutput(memo: StepMemo): unknown {
  return memo.outputUndefined ? undefined : memo.output;
}
