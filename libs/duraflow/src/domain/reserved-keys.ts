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

/** The idempotency key of the child a parent's step starts: a second start of the same child finds the first. */
export function childIdempotencyKey(parentTaskId: string, stepKey: string): string {
  return `duraflow-child:${parentTaskId}:${createHash('sha1').update(stepKey).digest('hex')}`;
}

/** The idempotency key of a schedule tick's task: the tick is visible on the task (`idempotencyKey`). */
export function scheduleIdempotencyKey(scheduleName: string, tickAt: Date): string {
  return `schedule:${scheduleName}:${tickAt.toISOString()}`;
}
