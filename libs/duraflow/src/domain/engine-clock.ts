/**
 * The engine's clock on the Node side: what every decision by time reads (a sleep's wake-up, a
 * signal wait's deadline, a retry's backoff, a schedule's next tick). The database side reads
 * `duraflow_now()` (migrations/1700000006000-EngineClock.ts). In production it is the system
 * clock (util/engine-clock.ts); the testing kit provides a virtual one under DURAFLOW_CLOCK.
 * Leases, heartbeats, claim tokens and leader leases never read it: they keep real time, so a
 * test cannot hide a crash-safety bug.
 */
export interface DuraflowClock {
  /** Milliseconds since the epoch, as Date.now(). */
  now(): number;
  /** Resolves `ms` later on this clock, or rejects with the signal's reason as soon as it aborts. */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
}

/** The injection token of the engine's DuraflowClock. */
export const DURAFLOW_CLOCK = Symbol.for('duraflow.clock');
