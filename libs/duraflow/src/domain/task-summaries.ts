import { StepRunStatus } from './entities/step-run.entity';
import { TaskStatus } from './task-status';

/** The first characters of a stored JSON value, cut in the database so a large value never travels whole. */
export interface JsonPreview {
  /** The value as indented JSON, at most `previewChars` characters of it. */
  text: string;
  /** Whether `text` is cut short. */
  truncated: boolean;
  /** Size of the stored value as compact JSON, in bytes. */
  bytes: number;
}

/** A step as an overview shows it: everything but its input and output, which come as previews. */
export interface StepSummary {
  id: string;
  taskId: string;
  stepKey: string;
  status: StepRunStatus;
  attempt: number;
  error: Record<string, unknown> | null;
  compensationFn: string | null;
  compensatedAt: Date | null;
  startedAt: Date | null;
  completedAt: Date | null;
  createdAt: Date;
  completionSeq: number | null;
  /** `sleep`, `signal` or `child` for a durable primitive's row; null for a step. */
  kind: string | null;
  /** A sleep's end or a signal wait's deadline. */
  wakeAt: Date | null;
  /** Null when nothing is stored (a step that returned `undefined`, or not completed). */
  input: JsonPreview | null;
  output: JsonPreview | null;
}

export interface StepSummaryOptions {
  /** Characters of each input and output kept in its preview: 1 to 1,048,576. Default 2,048. */
  previewChars?: number;
}

/**
 * How far a task has come, read in one cheap statement (no input or output is read): poll it
 * to learn that a task changed, then read what changed.
 */
export interface TaskProgress {
  status: TaskStatus;
  /** Moves on every change of the task row but heartbeats. */
  updatedAt: Date;
  /** Recoveries after worker death so far. */
  retryCount: number;
  steps: {
    total: number;
    completed: number;
    failed: number;
    compensated: number;
    /** Attempts of every step added up. */
    attempts: number;
  };
  deadLetters: {
    /** Entries of this task in the dead-letter queue now. */
    open: number;
    /** Their retries added up. */
    retries: number;
  };
}

/** Which tasks `countByStatus` counts. */
export interface TaskCountFilter {
  workflowName?: string;
  /** Created at or after this time. */
  createdAfter?: Date | string;
  /** Created before this time. */
  createdBefore?: Date | string;
  /** Only tasks holding every one of these tags. */
  tags?: Record<string, string>;
}

/** Tasks per status; every status is present (0 when none). */
export type TaskCounts = Record<TaskStatus, number>;
