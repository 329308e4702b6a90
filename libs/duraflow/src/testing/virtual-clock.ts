import { DuraflowClock } from '../domain/engine-clock';

interface Sleeper {
  due: number;
  wake: () => void;
}

/**
 * The test environment's clock: real time plus an offset that only `advanceTo` moves (forward).
 * The same offset is written to the test database's `duraflow_test_clock` row, which its
 * `duraflow_now()` adds, so the engine's SQL and its Node code read one clock.
 *
 * A sleep on it (a retry's backoff) ends when this clock reaches its end, whichever comes first:
 * real time passing, or the clock advanced past it.
 */
export class VirtualClock implements DuraflowClock {
  private offsetMs = 0;
  private readonly sleepers = new Set<Sleeper>();

  now(): number {
    return Date.now() + this.offsetMs;
  }

  /** How far ahead of real time this clock is. */
  get offset(): number {
    return this.offsetMs;
  }

  sleep(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      const sleeper: Sleeper = { due: this.now() + ms, wake: () => finish() };
      const timer = setTimeout(() => finish(), ms);
      const onAbort = () => {
        clearTimeout(timer);
        this.sleepers.delete(sleeper);
        reject(signal.reason);
      };
      const finish = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        this.sleepers.delete(sleeper);
        resolve();
      };
      this.sleepers.add(sleeper);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Sleeps under way (each a run waiting in a backoff). */
  get sleeping(): number {
    return this.sleepers.size;
  }

  /** The earliest end of a sleep under way. */
  nextSleepEnd(): number | undefined {
    let next: number | undefined;
    for (const { due } of this.sleepers) if (next === undefined || due < next) next = due;
    return next;
  }

  /** The offset that puts this clock at `time` now. */
  offsetFor(time: number): number {
    return Math.max(this.offsetMs, time - Date.now());
  }

  /** Moves the clock `offsetMs` ahead of real time (never back), and ends the sleeps due by then, earliest first. */
  moveTo(offsetMs: number): void {
    this.offsetMs = Math.max(this.offsetMs, Math.round(offsetMs));
    const now = this.now();
    const due = [...this.sleepers].filter((sleeper) => sleeper.due <= now).sort((a, b) => a.due - b.due);
    for (const sleeper of due) sleeper.wake();
  }
}
