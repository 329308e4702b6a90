import { createHash } from 'node:crypto';

/**
 * The keys the library writes under names of its own: step keys of the rows a run records
 * besides its steps, and the idempotency keys of the tasks it creates itself. Each is built here
 * and nowhere else.
 */

/**
 * `ctx.patched(id)` records its answer as a step_runs row of key `patch:<id>` (status
 * `completed`, output `true` or `false`, no compensation), in the namespace of step keys: a step
 * key starting with `patch:` is reserved.
 */
export const PATCH_MARKER_PREFIX = 'patch:';

export function patchMarkerKey(patchId: string): string {
  return `${PATCH_MARKER_PREFIX}${patchId}`;
}

export function isPatchMarker(stepKey: string): boolean {
  return stepKey.startsWith(PATCH_MARKER_PREFIX);
}

/** The step key of the `n`-th wait (1, 2, ...) for signal `name` in a run: replays reach the same waits in the same order. */
export function signalWaitKey(name: string, n: number): string {
  return `signal:${name}#${n}`;
}

const CHILD_KEY_PREFIX = 'duraflow-child:';
const SCHEDULE_KEY_PREFIX = 'schedule:';

/**
 * The prefixes of the idempotency keys the library gives the tasks it creates. A caller's
 * submit may not use them: a task created under one of these keys before the library's own
 * would otherwise be taken for the library's (a parent's child, a schedule's tick).
 */
export const RESERVED_IDEMPOTENCY_KEY_PREFIXES: readonly string[] = [CHILD_KEY_PREFIX, SCHEDULE_KEY_PREFIX];

/** The reserved prefix `key` starts with, or undefined. */
export function reservedIdempotencyKeyPrefix(key: string): string | undefined {
  return RESERVED_IDEMPOTENCY_KEY_PREFIXES.find((prefix) => key.startsWith(prefix));
}

/** The idempotency key of the child a parent's step starts: a second start of the same child finds the first. */
export function childIdempotencyKey(parentTaskId: string, stepKey: string): string {
  return `${CHILD_KEY_PREFIX}${parentTaskId}:${createHash('sha1').update(stepKey).digest('hex')}`;
}

/** The idempotency key of a schedule tick's task: the tick is visible on the task (`idempotencyKey`). */
export function scheduleIdempotencyKey(scheduleName: string, tickAt: Date): string {
  return `${SCHEDULE_KEY_PREFIX}${scheduleName}:${tickAt.toISOString()}`;
}

/** `ctx.createCallback(key)` records the callback it opened as the step `callback:<key>`. */
export function callbackStepKey(callbackKey: string): string {
  return `callback:${callbackKey}`;
}

const CALLBACK_SIGNAL_PREFIX = 'duraflow:callback:';

/**
 * A callback is completed by a signal of this name to its task (sent in the completion's
 * transaction), so `ctx.waitForCallback` is a signal wait: the signals' waking, timeouts and
 * recovery, written once. `workflows.signal` refuses the prefix.
 */
export function callbackSignalName(callbackId: string): string {
  return `${CALLBACK_SIGNAL_PREFIX}${callbackId}`;
}

export function isCallbackSignalName(name: string): boolean {
  return name.startsWith(CALLBACK_SIGNAL_PREFIX);
}
