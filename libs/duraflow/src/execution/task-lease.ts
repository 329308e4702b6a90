/** Why a run stopped before it finished. */
export type RunStopReason = 'cancelled' | 'lease-lost' | 'shutdown' | 'handed-back';

const STOP_MESSAGES: Record<RunStopReason, string> = {
  cancelled: 'was cancelled',
  'lease-lost': 'was taken over by another worker',
  shutdown: 'is being handed back on shutdown',
  'handed-back': 'was handed back before it started (it waited too long for a slot)',
};

/** A claimed task as the worker holds it while it runs: its fencing token and its stop switch. */
export class TaskLease {
  private readonly controller = new AbortController();
  private stopReason: RunStopReason | undefined;
  /** Called once when the run's own code is over and only its outcome is being written. */
  onRecording: (() => void) | undefined;

  constructor(
    readonly taskId: string,
    readonly claimToken: string,
  ) {}

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get stoppedBecause(): RunStopReason | undefined {
    return this.stopReason;
  }

  /** The run's code is over; only its outcome is being written (it no longer needs a slot). Once. */
  markRecording(): void {
    const onRecording = this.onRecording;
    this.onRecording = undefined;
    onRecording?.();
  }

  /** Aborts the run's signal (and so the running step's); the first reason wins. */
  stop(reason: RunStopReason): void {
    if (this.stopReason) return;
    this.stopReason = reason;
    this.controller.abort(new Error(`task ${this.taskId} ${STOP_MESSAGES[reason]}`));
  }
}
