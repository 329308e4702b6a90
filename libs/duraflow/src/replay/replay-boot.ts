/**
 * Set while the replay check boots a host's Nest module to read its workflows: the worker and
 * the reaper of that app do not start (the check must never claim or reap a task of the
 * database the app points at). A global symbol, so every copy of the package in the process sees it.
 */
const REPLAY_BOOT = Symbol.for('duraflow.replayBoot');

export function isReplayBoot(): boolean {
  return (globalThis as Record<symbol, unknown>)[REPLAY_BOOT] === true;
}

export async function duringReplayBoot<T>(boot: () => Promise<T>): Promise<T> {
  const globals = globalThis as Record<symbol, unknown>;
  const before = globals[REPLAY_BOOT];
  globals[REPLAY_BOOT] = true;
  try {
    return await boot();
  } finally {
    globals[REPLAY_BOOT] = before;
  }
}
