import { performance } from 'node:perf_hooks';
import { isTransientDatabaseError } from '../persistence/transient-error';
import { persist } from './persist';

/** Why a run stopped before it finished. */
export type RunStopReason = 'cancelled' | 'lease-lost' | 'shutdown' | 'handed-back';

const STOP_MESSAGES: Record<RunStopReason, string> = {
  cancelled: 'was cancelled',
  'lease-lost': 'was taken over by another worker',
  shutdown: 'is being handed back on shutdown',
  'handed-back': 'was handed back before it started (it waited too long for a slot)',
};

/** What a lease checks its claim against, and how long its statements outlast an outage. */
export interface LeaseFencing {
  /** How long a statement is retried while the database is unreachable: as long as the task stays unreaped. */
  retryForMs: number;
  /** Whether the claim still owns its running task. */
  ownsTask(taskId: string, claimToken: string): Promise<boolean>;
  /**
   * A lease confirmed longer ago than this (`worker.leaseConfirmAfterMs`) is confirmed against
   * the database before the run calls user code again.
   */
  confirmAfterMs: number;
  /** One fenced heartbeat of this claim alone: true while it still owns its running task (and its heartbeat_at is now). */
  confirm(taskId: string, claimToken: string): Promise<boolean>;
}

/**
 * A claimed task as this process holds it while it runs (a worker's run, or a rollback that
 * cancel started): its fencing token, its stop switch, and the one way its statements reach
 * the database.
 *
 * Every statement of the run goes through `retry` (a read, or a write whose result the caller
 * judges) or `write` (a fenced write): retried while the database is unreachable for as long
 * as the task would stay unreaped, and given up as soon as the lease stops. A fenced write that
 * changed nothing is not taken as lost at once: a retry of a write whose first try committed
 * (its reply was lost) changes nothing either. So the claim's ownership is asked, and only a
 * claim that owns its task no more stops the lease (`lease-lost`); the run then changes nothing.
 *
 * The run's code reads `stoppedBecause` before each step and each compensation starts, and
 * every write it makes comes through here: the lease is the one place that decides whether
 * this process may still act for the task.
 *
 * Its age is known without a round trip: `confirmedAt` is the `performance.now()` (monotonic,
 * unaffected by wall-clock jumps) at which the last heartbeat or claim that landed was *sent*;
 * the database stamped heartbeat_at later than that, so the reaper cannot take the task before
 * `confirmedAt + staleAfterMs`. A process whose event loop stalled (a freeze, a long GC pause,
 * a synchronous loop) may wake with its task long reaped and run by another worker: before it
 * calls user code again, `confirmIfOld` sees the lease is old and asks the database first.
 */
export class TaskLease {
  private readonly controller = new AbortController();
  private stopReason: RunStopReason | undefined;
  private outcomeStarted = false;
  /** `performance.now()` when the last heartbeat (or the claim) that this claim still owned was sent. */
  private confirmedAt: number;

  constructor(
    readonly taskId: string,
    readonly claimToken: string,
    private readonly fencing: LeaseFencing,
    /** When the claim was sent (`performance.now()`); default now. */
    claimedAt: number = performance.now(),
  ) {
    this.confirmedAt = claimedAt;
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get stoppedBecause(): RunStopReason | undefined {
    return this.stopReason;
  }

  /** The run is writing its final status: a task-finished notification of its task is its own doing, not a cancel. */
  get writingOutcome(): boolean {
    return this.outcomeStarted;
  }

  /** Milliseconds since the lease was last confirmed, on the monotonic clock. */
  get ageMs(): number {
    return performance.now() - this.confirmedAt;
  }

  /** A heartbeat sent at `sentAt` (`performance.now()`) found the claim still owning its task. */
  confirmed(sentAt: number): void {
    if (sentAt > this.confirmedAt) this.confirmedAt = sentAt;
  }

  /**
   * Before user code starts (a step's body, a compensation, the run function): nothing when
   * the lease is younger than `confirmAfterMs` (the common path, no round trip); otherwise one
   * fenced heartbeat of this claim, and the lease stops (`lease-lost`) when the claim no longer
   * owns its task, or when the database stays unreachable for the retry window (by then the
   * task is stale and the reaper may have given it to another worker). Never rejects but for
   * a statement that is wrong; the caller reads `stoppedBecause` after it.
   */
  async confirmIfOld(): Promise<void> {
    if (this.stopReason || this.ageMs < this.fencing.confirmAfterMs) return;
    const sentAt = performance.now();
    let owned: boolean;
    try {
      owned = await this.retry(() => this.fencing.confirm(this.taskId, this.claimToken));
    } catch (error) {
      if (this.stopReason) return;
      if (!isTransientDatabaseError(error)) throw error;
      owned = false;
    }
    if (owned) this.confirmed(sentAt);
    else this.stop('lease-lost');
  }

  /** Aborts the run's signal (and so the running step's); the first reason wins. */
  stop(reason: RunStopReason): void {
    if (this.stopReason) return;
    this.stopReason = reason;
    this.controller.abort(new Error(`task ${this.taskId} ${STOP_MESSAGES[reason]}`));
  }

  /** A statement of the run, retried while the database is unreachable; rethrows once the window passed or the lease stopped. */
  retry<T>(statement: () => Promise<T>): Promise<T> {
    return persist(statement, { giveUpAfterMs: this.fencing.retryForMs, signal: this.signal });
  }

  /**
   * A fenced write (`statement` resolves true when it changed a row). Resolves true once it
   * landed, or an earlier try of it did; false when the claim owns the task no more, and the
   * lease is then stopped (`lease-lost`). Rethrows what `retry` rethrows.
   */
  async write(statement: () => Promise<boolean>): Promise<boolean> {
    const landed = (await this.retry(statement)) || (await this.retry(() => this.fencing.ownsTask(this.taskId, this.claimToken)));
    if (!landed) this.stop('lease-lost');
    return landed;
  }

  /** `write` of the run's final status (completed, failed, or a rollback's end). */
  writeOutcome(statement: () => Promise<boolean>): Promise<boolean> {
    this.outcomeStarted = true;
    return this.write(statement);
  }
}
