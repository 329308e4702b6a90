/**
 * A run as the replay check reads it: the task's identity and input, and its recorded steps.
 * The same shape is what `duraflow export-runs` writes (RecordedRunsFile), so a CI without the
 * production database replays exactly what the database holds.
 */
export interface RecordedStep {
  stepKey: string;
  /** `completed` steps are replayed (their output fed back); others (failed attempts) count as not recorded. */
  status: string;
  /** The saved output; absent when the step returned undefined. */
  output?: unknown;
  completionSeq: number | null;
  /** A durable primitive's row (sleep, signal, child); absent for a step. */
  kind?: string | null;
}

export interface RecordedRun {
  taskId: string;
  workflowName: string;
  /** As stored: null is version 1. */
  workflowVersion: number | null;
  status: string;
  input: unknown;
  retryCount: number;
  steps: RecordedStep[];
}

export const RECORDED_RUNS_FORMAT = 'duraflow-recorded-runs';

/** What `duraflow export-runs --out file.json` writes and `replay-check --from file.json` reads. */
export interface RecordedRunsFile {
  format: typeof RECORDED_RUNS_FORMAT;
  formatVersion: 1;
  exportedAt: string;
  runs: RecordedRun[];
}
