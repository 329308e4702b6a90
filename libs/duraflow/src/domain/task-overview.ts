/** The time windows the overview shows, each cut into intervals of one length. */
export type OverviewWindow = 'hour' | 'day' | 'week';

export const OVERVIEW_WINDOWS: Readonly<Record<OverviewWindow, { intervals: number; intervalMs: number }>> = {
  hour: { intervals: 12, intervalMs: 5 * 60_000 },
  day: { intervals: 24, intervalMs: 3_600_000 },
  week: { intervals: 28, intervalMs: 6 * 3_600_000 },
};

/** Tasks started (created) and finished, by how they ended, in one span of time. */
export interface TaskOutcomeCounts {
  started: number;
  completed: number;
  /** `failed` and `partial_rollback` (a rollback that left a dead letter). */
  failed: number;
  rolledBack: number;
  cancelled: number;
}

/** One interval of a window: its counts and the durations of the tasks that finished in it. */
export interface OverviewInterval extends TaskOutcomeCounts {
  start: Date;
  end: Date;
  /** Of the tasks that finished in it (cancelled ones left out), from started to finished; null when none did. */
  p50Ms: number | null;
  p95Ms: number | null;
}

/** One workflow (or all of them) over the window, and its queue now. */
export interface WorkflowOverview {
  /** Null: every workflow together. */
  workflow: string | null;
  intervals: OverviewInterval[];
  totals: TaskOutcomeCounts & {
    /** (failed + rolled back) / (completed + failed + rolled back); null when none finished. */
    failureRate: number | null;
    p50Ms: number | null;
    p95Ms: number | null;
  };
  /** Pending tasks runnable now (not waiting for a later time), held ones included. */
  queueDepth: number;
  running: number;
  /** How long the oldest runnable pending task has waited; null when none waits. */
  oldestRunnableMs: number | null;
}

/**
 * What the dashboard's overview shows for a window: per workflow and overall. Durations are read
 * from histograms of ratio 2^(1/4) (about 19% per bucket), so a percentile is exact to that.
 */
export interface TaskOverview {
  window: OverviewWindow;
  from: Date;
  to: Date;
  intervalMs: number;
  overall: WorkflowOverview;
  workflows: WorkflowOverview[];
  /** Up to when the hourly rollup holds the counts (later ones are read from the tasks); null before its first run. */
  rolledUntil: Date | null;
}

/** A step of a workflow as its recent runs recorded it. */
export interface WorkflowStepStats {
  stepKey: string;
  /** A durable primitive's kind (sleep, signal, child, ...), null for a step. */
  kind: string | null;
  runs: number;
  /** Step rows whose last attempt failed. */
  failed: number;
  /** Step rows that needed more than one attempt. */
  retried: number;
  p50Ms: number | null;
  p95Ms: number | null;
}

/** The tasks of a workflow a deploy must wait for, by version, and the workers running them now. */
export interface WorkflowVersionStatus {
  version: number;
  /** This process registers the version's code. */
  registeredHere: boolean;
  pending: number;
  running: number;
  held: number;
  /** The workers (worker ids) running tasks of this version now. */
  workers: string[];
}

/** An event that starts the workflow (`@Workflow(name, { on })`), as the nodes that register it wrote it. */
export interface WorkflowSubscription {
  eventName: string;
  mode: 'each' | 'debounce' | 'batch';
  periodMs: number | null;
  maxWaitMs: number | null;
  maxSize: number | null;
  timeoutMs: number | null;
}
