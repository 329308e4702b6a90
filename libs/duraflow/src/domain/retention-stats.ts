/** Finished tasks removed by retention, per final status (the option's names). */
export interface RetentionCounts {
  completed: number;
  failed: number;
  rolledBack: number;
  cancelled: number;
}

/** What retention removed on this node since it started (it runs on the reaper's leader only). */
export interface RetentionStats {
  /** False when no status has a retention: nothing is ever removed. */
  enabled: boolean;
  removed: RetentionCounts;
  /** DELETE statements sent (each at most `retention.batchSize` tasks per status). */
  batches: number;
  /** When the last sweep ended, or null before the first. */
  lastSweepAt: Date | null;
}
