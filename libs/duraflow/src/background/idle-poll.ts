/** What the poll asks of the worker loop on each of its turns. */
export interface IdlePollHost {
  /** The poll interval now (the backpressure monitor's: longer while the event loop lags). */
  intervalMs(): number;
  /** The longest the poll backs off to while nothing happens (`worker.maxIdlePollIntervalMs`). */
  readonly maxIdleIntervalMs: number;
  /** Nothing is held and LISTEN is up: a quiet turn may back off (without LISTEN the poll is the only way to hear of a submit). */
  quiet(): boolean;
  /** One poll: the work the worker does on it. */
  poll(): void;
}

/**
 * The worker's fallback poll, with an idle backoff. States: `active` (something happened since
 * the last turn: a NOTIFY, a claimed task, LISTEN lost) polls every `intervalMs`; a turn that
 * finds it quiet doubles the delay, up to `maxIdleIntervalMs`; activity during a backed-off wait
 * brings the next turn back to `intervalMs` at once. Stopped, it schedules nothing.
 */
export class IdlePoll {
  private timer: NodeJS.Timeout | undefined;
  /** The delay of the turn now scheduled; above the interval while backing off. */
  private delayMs = 0;
  private active = true;
  private running = false;

  constructor(private readonly host: IdlePollHost) {}

  start(): void {
    this.running = true;
    this.schedule();
  }

  stop(): void {
    this.running = false;
    clearTimeout(this.timer);
  }

  /** Something happened: the poll goes back to its interval at once (not after the backed-off wait). */
  noteActivity(): void {
    this.active = true;
    if (!this.running || this.delayMs <= this.host.intervalMs()) return;
    clearTimeout(this.timer);
    this.schedule();
  }

  private schedule(): void {
    this.delayMs = this.nextDelay();
    this.timer = setTimeout(() => {
      this.host.poll();
      if (this.running) this.schedule();
    }, this.delayMs);
  }

  private nextDelay(): number {
    const base = this.host.intervalMs();
    const quiet = !this.active && this.host.quiet();
    this.active = false;
    if (!quiet) return base;
    return Math.min(Math.max(this.delayMs * 2, base), Math.max(base, this.host.maxIdleIntervalMs));
  }
}
