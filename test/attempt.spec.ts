import { AttemptHandle, runAttempt } from '../libs/duraflow/src/execution/attempt';

/*
 * runAttempt on its own (no database): the attempt's signal is made only when read, and
 * whether it was read before or after the stop, it is aborted with the stop's reason.
 */
describe('runAttempt', () => {
  const timeoutError = () => new Error('timed out');

  it('returns the value of code that does not await, and turns a synchronous throw into a rejection', async () => {
    const parent = new AbortController();
    await expect(runAttempt(() => 42, parent.signal, 1_000, timeoutError)).resolves.toBe(42);
    await expect(
      runAttempt(
        () => {
          throw new Error('sync failure');
        },
        parent.signal,
        undefined,
        timeoutError,
      ),
    ).rejects.toThrow('sync failure');
  });

  it('does not start the code when the run is stopped already', async () => {
    const parent = new AbortController();
    parent.abort(new Error('cancelled'));
    const body = jest.fn(() => 1);
    await expect(runAttempt(body, parent.signal, undefined, timeoutError)).rejects.toThrow('cancelled');
    expect(body).not.toHaveBeenCalled();
  });

  it('settles when the run stops, and aborts the signal read before and the signal read after', async () => {
    const parent = new AbortController();
    let handle!: AttemptHandle;
    let early!: AbortSignal;
    const attempt = runAttempt(
      (h) => {
        handle = h;
        early = h.signal;
        return new Promise<never>(() => undefined); // ignores its signal
      },
      parent.signal,
      undefined,
      timeoutError,
    );
    expect(early.aborted).toBe(false);
    const reason = new Error('run stopped');
    parent.abort(reason);

    await expect(attempt).rejects.toBe(reason);
    expect(early.aborted).toBe(true);
    expect(early.reason).toBe(reason);
    expect(handle.signal).toBe(early);
  });

  it('aborts a signal first read after a timeout, with the timeout error', async () => {
    const parent = new AbortController();
    let handle!: AttemptHandle;
    const attempt = runAttempt(
      (h) => {
        handle = h;
        return new Promise<never>(() => undefined);
      },
      parent.signal,
      20,
      timeoutError,
    );
    await expect(attempt).rejects.toThrow('timed out');
    expect(handle.signal.aborted).toBe(true);
    expect((handle.signal.reason as Error).message).toBe('timed out');
  });

  it('gives each attempt its own signal and leaves no listener on the run signal', async () => {
    const parent = new AbortController();
    const add = jest.spyOn(parent.signal, 'addEventListener');
    const remove = jest.spyOn(parent.signal, 'removeEventListener');
    const signals: AbortSignal[] = [];
    for (let i = 0; i < 3; i++) {
      await runAttempt(
        async (h) => {
          signals.push(h.signal);
          return i;
        },
        parent.signal,
        1_000,
        timeoutError,
      );
    }
    expect(new Set(signals).size).toBe(3);
    expect(signals.every((signal) => !signal.aborted)).toBe(true);
    expect(remove.mock.calls.map(([, listener]) => listener)).toEqual(add.mock.calls.map(([, listener]) => listener));
  });
});
