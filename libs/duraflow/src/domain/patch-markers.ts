/**
 * `ctx.patched(id)` records its answer as a step_runs row of key `patch:<id>` (status
 * `completed`, output `true` or `false`, no compensation), in the namespace of step keys: a
 * step key starting with `patch:` is reserved.
 */
export const PATCH_MARKER_PREFIX = 'patch:';

export function patchMarkerKey(patchId: string): string {
  return `${PATCH_MARKER_PREFIX}${patchId}`;
}

export function isPatchMarker(stepKey: string): boolean {
  return stepKey.startsWith(PATCH_MARKER_PREFIX);
}
