import { FlowLimitStats } from './flow-control';

export type WorkerState = 'idle' | 'running' | 'stopping' | 'stopped';

export interface WorkerStats {
  workerId: string;
  state: WorkerState;
  concurrency: number;
  /** Tasks this process is running now. */
  running: number;
  /** Since start, by outcome. */
  claimed: number;
  completed: number;
  failed: number;
  /** Runs that failed and were undone by the saga (every compensation succeeded). */
  rolledBack: number;
  /** Runs that failed and were undone in part (a compensation went to the dead-letter queue). */
  partialRollback: number;
  /** Rollbacks of cancelled tasks this worker finished (after a crash of the canceller). */
  cancelled: number;
  /** Runs stopped by cancellation, takeover or shutdown, and tasks claimed ahead that were handed back unstarted. */
  stopped: number;
  /** Runs whose outcome could not be written (the database was unreachable). */
  unrecorded: number;
  /** Runs the determinism guard held: their code took another path than the one they recorded. */
  held: number;
  /** Runs that reached a wait (sleep, signal, child) and gave their slot back until it is over. */
  suspended: number;
  /** The LISTEN connection is up (otherwise only polling wakes the worker). */
  listening: boolean;
  backpressure: BackpressureStats;
  workflows: string[];
  /**
   * What waits on the flow limits of this process's workflows (empty when none has limits):
   * per workflow its `concurrency` and `rateLimit`, and the keys at their `keyConcurrency` or
   * per-key rate limit with tasks waiting. Read from the database at most once a second, in the
   * background: a call returns the last reading (`worker.readLimits()` reads now).
   */
  limits: FlowLimitStats[];
}

export interface BackpressureStats {
  /** Tasks this process holds now (running, or claimed and waiting for a slot). */
  queued: number;
  /** Of those, claimed ahead (`worker.prefetch`) and waiting for a slot. */
  waiting: number;
  /** How many tasks it claims ahead of its free slots now (with `prefetch: 'auto'`, `concurrency` or 0). */
  prefetch: number;
  maxQueued: number;
  /** `queued` reached `maxQueuedTasks`: polling has stopped until tasks finish. */
  queueFull: boolean;
  /** The longest event loop delay in the last complete window, in ms. */
  eventLoopLagMs: number;
  /** `eventLoopLagMs` is over `maxEventLoopLagMs`: polling is slowed down. */
  lagging: boolean;
  /** The poll interval in force now. */
  pollIntervalMs: number;
}
