import { Logger } from '@nestjs/common';
import { IntervalHistogram, monitorEventLoopDelay } from 'node:perf_hooks';
import { ResolvedDuraflowOptions } from '../config/resolved-options';

/**
 * When a worker takes less work. Event loop lag is measured per window (`lagWindowMs`, then
 * reset), not over the process's lifetime: while the longest delay of the last window is over
 * `maxEventLoopLagMs` the worker polls `slowdownFactor` times less often and ignores NOTIFY
 * wake-ups, so a process that lags now does not claim more work now. And a worker that holds
 * `maxQueuedTasks` (running or waiting for a slot) claims nothing until some end.
 */
export class BackpressureMonitor {
  private timer: NodeJS.Timeout | undefined;
  private histogram: IntervalHistogram | undefined;
  private lagMs = 0;
  private lag = false;

  constructor(
    private readonly worker: ResolvedDuraflowOptions['worker'],
    private readonly logger: Logger,
  ) {}

  /** The longest event loop delay in the last complete window, in ms. */
  get eventLoopLagMs(): number {
    return this.lagMs;
  }

  get lagging(): boolean {
    return this.lag;
  }

  /** The poll interval in force: slower while the event loop lags. */
  get pollIntervalMs(): number {
    const { pollIntervalMs, backpressure } = this.worker;
    return this.lag ? pollIntervalMs * backpressure.slowdownFactor : pollIntervalMs;
  }

  /** How many more tasks a worker that holds `held` may claim. */
  room(held: number): number {
    return this.worker.backpressure.maxQueuedTasks - held;
  }

  queueFull(held: number): boolean {
    return this.room(held) <= 0;
  }

  /** Starts measuring; `onWindow` runs at the end of every window. */
  start(onWindow: () => void): void {
    const { lagWindowMs, maxEventLoopLagMs } = this.worker.backpressure;
    const histogram = monitorEventLoopDelay({ resolution: 10 });
    histogram.enable();
    this.histogram = histogram;
    this.timer = setInterval(() => {
      onWindow();
      this.lagMs = Math.round(histogram.max / 1e6);
      histogram.reset();
      const lagging = this.lagMs > maxEventLoopLagMs;
      if (lagging !== this.lag) {
        this.logger.warn(
          lagging
            ? `Event loop lag ${this.lagMs} ms (over ${maxEventLoopLagMs} ms): polling every ${this.worker.pollIntervalMs * this.worker.backpressure.slowdownFactor} ms`
            : `Event loop lag back to ${this.lagMs} ms: polling every ${this.worker.pollIntervalMs} ms`,
        );
      }
      this.lag = lagging;
    }, lagWindowMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.histogram?.disable();
    this.histogram = undefined;
    this.lag = false;
  }
}
