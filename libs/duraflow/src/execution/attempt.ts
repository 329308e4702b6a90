/**
 * Runs one attempt of user code with its own AbortSignal, which aborts when `parent` aborts
 * (cancel, lost lease, shutdown) or when `timeoutMs` passes. The attempt settles as soon as
 * its signal aborts, whether or not the code honours the signal.
 */
export async function runAttempt<T>(
  body: (signal: AbortSignal) => T | Promise<T>,
  parent: AbortSignal,
  timeoutMs: number | undefined,
  timeoutError: () => Error,
): Promise<T> {
  if (parent.aborted) throw parent.reason; // stopped already: do not start the body at all
  const controller = new AbortController();
  const forwardStop = () => controller.abort(parent.reason);
  parent.addEventListener('abort', forwardStop, { once: true });
  const aborted = new Promise<never>((_, reject) =>
    controller.signal.addEventListener('abort', () => reject(controller.signal.reason), { once: true }),
  );
  aborted.catch(() => undefined);
  const timer = timeoutMs === undefined ? undefined : setTimeout(() => controller.abort(timeoutError()), timeoutMs);
  try {
    return await Promise.race([(async () => body(controller.signal))(), aborted]);
  } finally {
    if (timer) clearTimeout(timer);
    parent.removeEventListener('abort', forwardStop);
  }
}
