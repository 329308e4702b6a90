import { RunOutcome } from '../domain/run-outcome';
import { WorkerStats } from '../domain/worker-stats';

/** The counters of `worker.stats()`: tasks claimed, and runs by how they ended, since start. */
export type RunCounts = Pick<
  WorkerStats,
  'claimed' | 'completed' | 'failed' | 'rolledBack' | 'partialRollback' | 'cancelled' | 'stopped' | 'unrecorded' | 'held' | 'suspended'
>;

const COUNTER_OF: Record<RunOutcome, keyof RunCounts> = {
  completed: 'completed',
  failed: 'failed',
  rolled_back: 'rolledBack',
  partial_rollback: 'partialRollback',
  cancelled: 'cancelled',
  stopped: 'stopped',
  unrecorded: 'unrecorded',
  held: 'held',
  suspended: 'suspended',
};

/** What this process's worker claimed and how its runs ended. */
export class RunCounters {
  private readonly counts: RunCounts = {
    claimed: 0,
    completed: 0,
    failed: 0,
    rolledBack: 0,
    partialRollback: 0,
    cancelled: 0,
    stopped: 0,
    unrecorded: 0,
    held: 0,
    suspended: 0,
  };

  claimed(): void {
    this.counts.claimed++;
  }

  ended(outcome: RunOutcome): void {
    this.counts[COUNTER_OF[outcome]]++;
  }

  snapshot(): RunCounts {
    return { ...this.counts };
  }
}
