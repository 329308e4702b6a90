/** What an attempt's code gets: its own AbortSignal, made the first time it is read. */
export interface AttemptHandle {
  readonly signal: AbortSignal;
}

/**
 * Runs one attempt of user code with its own AbortSignal, which aborts when `parent` aborts
 * (cancel, lost lease, shutdown) or when `timeoutMs` passes. The attempt settles as soon as
 * its signal aborts, whether or not the code honours the signal.
 *
 * Cheap for the common step: the signal is made only if the code reads it, and code that
 * returns without awaiting anything (no promise) needs neither a listener nor a timer.
 */
export function runAttempt<T>(
  body: (attempt: AttemptHandle) => T | Promise<T>,
  parent: AbortSignal,
  timeoutMs: number | undefined,
  timeoutError: () => Error,
): Promise<T> {
  if (parent.aborted) return Promise.reject(parent.reason); // stopped already: do not start the body at all
  let controller: AbortController | undefined;
  let stopReason: { reason: unknown } | undefined;
  const handle: AttemptHandle = {
    get signal() {
      if (!controller) {
        controller = new AbortController();
        if (stopReason) controller.abort(stopReason.reason);
      }
      return controller.signal;
    },
  };

  let result: T | Promise<T>;
  try {
    result = body(handle);
  } catch (error) {
    return Promise.reject(error);
  }
  if (!isThenable(result)) return Promise.resolve(result);

  const pending = result;
  return new Promise<T>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const stop = (reason: unknown) => {
      if (stopReason) return;
      stopReason = { reason };
      controller?.abort(reason);
      cleanUp();
      reject(reason);
    };
    const onParentAbort = () => stop(parent.reason);
    const cleanUp = () => {
      if (timer) clearTimeout(timer);
      parent.removeEventListener('abort', onParentAbort);
    };
    parent.addEventListener('abort', onParentAbort, { once: true });
    if (timeoutMs !== undefined) timer = setTimeout(() => stop(timeoutError()), timeoutMs);
    Promise.resolve(pending).then(
      (value) => {
        if (stopReason) return;
        cleanUp();
        resolve(value);
      },
      (error: unknown) => {
        if (stopReason) return;
        cleanUp();
        reject(error);
      },
    );
  });
}

function isThenable<T>(value: T | Promise<T>): value is Promise<T> {
  return typeof (value as { then?: unknown } | null | undefined)?.then === 'function';
}
