import { ResolvedCallbackOptions } from '../config/callbacks.options';
import { CallbacksNotConfiguredError, RunAbortedError } from '../domain/errors';
import { callbackStepKey } from '../domain/reserved-keys';
import { CallbackHandle } from '../domain/workflow-context';
import { TaskLease } from '../lease/task-lease';
import { CallbackStore } from '../persistence/callback.store';
import { callbackUrl } from '../util/callback-token';
import { effectKey } from '../util/effect-key';

/**
 * Opens a live run's callbacks (the body of its `callback:<key>` step): the row, fenced on the
 * run's claim, under an id derived from the task and the key (the step's effect key), so a step
 * that runs again after a crash opens the same callback, with the expiry it was first given,
 * and makes the same url.
 */
export class CallbackOpener {
  constructor(
    private readonly store: CallbackStore,
    private readonly options: ResolvedCallbackOptions | null,
    private readonly now: () => number,
  ) {}

  async open(lease: TaskLease, key: string, timeoutMs: number | undefined): Promise<CallbackHandle> {
    if (!this.options) throw new CallbacksNotConfiguredError();
    const id = effectKey(lease.taskId, callbackStepKey(key));
    const expiresAt = timeoutMs === undefined ? null : new Date(this.now() + timeoutMs);
    const opened = await lease.retry(() => this.store.open({ id, taskId: lease.taskId, claimToken: lease.claimToken, key, expiresAt }));
    if (!opened) {
      lease.stop('lease-lost');
      throw new RunAbortedError(lease.taskId, 'lease-lost');
    }
    const expires = opened.expiresAt ? opened.expiresAt.getTime() : null;
    const url = callbackUrl(this.options, { taskId: lease.taskId, callbackId: id, key, expiresAt: expires });
    return { id, url, key, expiresAt: expires === null ? null : new Date(expires).toISOString() };
  }

  /** The wait timed out: the row says so (a completion is refused either way, its expiry passed). */
  async expired(lease: TaskLease, callbackId: string): Promise<void> {
    await lease.retry(() => this.store.markExpired(callbackId));
  }
}
