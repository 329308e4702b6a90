/** How big each scenario is: the full run (about 10 minutes on 2 cores) or the quick CI smoke. */
export interface BenchSizes {
  /** `pgbench -T` of each reference run. */
  pgbenchSeconds: number;
  /** Rows queued for the SKIP LOCKED reference (more than it can claim in pgbenchSeconds). */
  skipLockedRows: number;
  submitWarmup: number;
  submitSequential: number;
  submitConcurrent: number;
  submitCallers: number;
  submitBatched: number;
  submitBatchSize: number;
  /** Tasks pre-submitted for each drain run, by steps per task. */
  drainTasks: Record<DrainSteps, number>;
  drainConcurrency: number[];
  drainProcesses: number[];
  stepOverheadWarmup: number;
  /**
   * Steps of one run before the per-step measurement: V8 optimizes the step runner's code only
   * after a few thousand calls, and a worker in service runs with it optimized.
   */
  stepOverheadWarmupSteps: number;
  stepOverheadRuns: number;
  latencyWarmup: number;
  latencySamples: number;
  claimDepths: { small: number; large: number };
  claimBatch: number;
  claimWarmup: number;
  claimSamples: number;
  /** Durable primitives (issue 15): sleeps timed at once, signal round trips, parent/10-step pairs, sleeping tasks. */
  primitives: { sleeps: number; signals: number; childRuns: number; sleepingForClaim: number; sleepingIdle: number; idleSeconds: number };
  recoveryRuns: number;
  /** 0-step tasks drained by one worker process between the two RSS readings. */
  rssTasks: number;
  /** 0-step tasks submitted through submit() / submitMany() into a new database, then drained. */
  submittedDrainTasks: number;
  /** 0-step tasks of each flow-control drain (no limits, a workflow limit, many keys). */
  flowDrainTasks: number;
  /** Rounds of the four flow-control drains, back to back: each row is the median, each ratio the median of the rounds' ratios. */
  flowDrainRounds: number;
  /** Keys of the keyed flow-control drain (keyConcurrency 1). */
  flowKeys: number;
}

export type DrainSteps = 0 | 1 | 10;
export const DRAIN_STEPS: DrainSteps[] = [0, 1, 10];

export const FULL_SIZES: BenchSizes = {
  pgbenchSeconds: 8,
  skipLockedRows: 300_000,
  submitWarmup: 200,
  submitSequential: 5_000,
  submitConcurrent: 10_000,
  submitCallers: 10,
  submitBatched: 10_000,
  submitBatchSize: 100,
  drainTasks: { 0: 8_000, 1: 7_000, 10: 2_000 },
  drainConcurrency: [10, 50],
  drainProcesses: [1, 2],
  stepOverheadWarmup: 2,
  stepOverheadWarmupSteps: 2_000,
  stepOverheadRuns: 31,
  latencyWarmup: 20,
  latencySamples: 200,
  claimDepths: { small: 1_000, large: 100_000 },
  claimBatch: 10,
  claimWarmup: 10,
  claimSamples: 50,
  primitives: { sleeps: 100, signals: 50, childRuns: 11, sleepingForClaim: 100_000, sleepingIdle: 10_000, idleSeconds: 5 },
  recoveryRuns: 5,
  rssTasks: 100_000,
  submittedDrainTasks: 20_000,
  flowDrainTasks: 8_000,
  flowDrainRounds: 3,
  flowKeys: 1_000,
};

export const QUICK_SIZES: BenchSizes = {
  pgbenchSeconds: 1,
  skipLockedRows: 30_000,
  submitWarmup: 20,
  submitSequential: 200,
  submitConcurrent: 300,
  submitCallers: 10,
  submitBatched: 300,
  submitBatchSize: 100,
  drainTasks: { 0: 200, 1: 200, 10: 40 },
  drainConcurrency: [10, 50],
  drainProcesses: [1, 2],
  stepOverheadWarmup: 1,
  stepOverheadWarmupSteps: 50,
  stepOverheadRuns: 5,
  latencyWarmup: 5,
  latencySamples: 30,
  claimDepths: { small: 1_000, large: 100_000 },
  claimBatch: 10,
  claimWarmup: 3,
  claimSamples: 10,
  primitives: { sleeps: 10, signals: 5, childRuns: 2, sleepingForClaim: 10_000, sleepingIdle: 1_000, idleSeconds: 1 },
  recoveryRuns: 1,
  rssTasks: 2_000,
  submittedDrainTasks: 300,
  flowDrainTasks: 300,
  flowDrainRounds: 1,
  flowKeys: 50,
};

/** The intervals the recovery scenario uses (those of the chaos tests). */
export const SHORT_INTERVALS = { heartbeatIntervalMs: 100, staleAfterMs: 1_000, reaperIntervalMs: 200 };
