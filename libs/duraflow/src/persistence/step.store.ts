import { Injectable } from '@nestjs/common';
import { StepRun } from '../entities/step-run.entity';
import { DuraflowDatabase } from './duraflow-database';
import { STEP_COLUMNS, toStepRun } from './row-mappers';

/** What a run needs to know of a step it may have run before. */
export interface StepMemo {
  stepKey: string;
  status: string;
  output: unknown;
  /** The step returned `undefined` (stored as SQL NULL, unlike a JSON `null`). */
  outputUndefined: boolean;
  attempt: number;
}

/**
 * The owner check of every checkpoint: the task row is read FOR SHARE, so a concurrent
 * reap, cancel or release waits for this write, or this write sees it and lands nowhere.
 */
const OWNED_TASK = `SELECT 1 FROM agent_tasks WHERE id = $1 AND claim_token = $3 AND status = 'running' FOR SHARE`;

/** Every statement on `step_runs`. */
@Injectable()
export class StepStore {
  constructor(private readonly db: DuraflowDatabase) {}

  async loadStepMemos(taskId: string): Promise<Map<string, StepMemo>> {
    const { rows } = await this.db.query(
      `SELECT step_key, status, output, output IS NULL AS output_undefined, attempt FROM step_runs WHERE task_id = $1`,
      [taskId],
      'duraflow_load_steps',
    );
    return new Map(
      rows.map((row) => [
        row.step_key,
        { stepKey: row.step_key, status: row.status, output: row.output, outputUndefined: row.output_undefined, attempt: row.attempt ?? 0 },
      ]),
    );
  }

  /**
   * The checkpoint: one fenced statement writes the step `completed` with its output. A
   * completed row is never overwritten. Returns false when this claim no longer owns the task.
   */
  async recordStepCompleted(step: {
    taskId: string;
    claimToken: string;
    stepKey: string;
    outputJson: string | null;
    compensationFn: string | null;
    attempt: number;
    startedAt: Date;
  }): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `INSERT INTO step_runs (task_id, step_key, status, output, compensation_fn, attempt, started_at, completed_at, completion_seq)
       SELECT $1, $2, 'completed', $4::jsonb, $5, $6, $7, clock_timestamp(),
              (SELECT COALESCE(MAX(completion_seq), 0) + 1 FROM step_runs WHERE task_id = $1)
       FROM (${OWNED_TASK}) owner
       ON CONFLICT (task_id, step_key) DO UPDATE
       SET status = 'completed', output = EXCLUDED.output, error = NULL, compensation_fn = EXCLUDED.compensation_fn,
           attempt = EXCLUDED.attempt, started_at = EXCLUDED.started_at, completed_at = EXCLUDED.completed_at,
           completion_seq = EXCLUDED.completion_seq
       WHERE step_runs.status <> 'completed'
       RETURNING id`,
      [step.taskId, step.stepKey, step.claimToken, step.outputJson, step.compensationFn, step.attempt, step.startedAt],
      'duraflow_step_completed',
    );
    return rowCount > 0;
  }

  /** Fenced: records a failed attempt (the error and the attempt number). */
  async recordStepFailed(step: {
    taskId: string;
    claimToken: string;
    stepKey: string;
    errorJson: string;
    attempt: number;
    startedAt: Date;
  }): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `INSERT INTO step_runs (task_id, step_key, status, error, attempt, started_at)
       SELECT $1, $2, 'failed', $4::jsonb, $5, $6
       FROM (${OWNED_TASK}) owner
       ON CONFLICT (task_id, step_key) DO UPDATE
       SET status = 'failed', error = EXCLUDED.error, attempt = EXCLUDED.attempt, started_at = EXCLUDED.started_at
       WHERE step_runs.status <> 'completed'
       RETURNING id`,
      [step.taskId, step.stepKey, step.claimToken, step.errorJson, step.attempt, step.startedAt],
      'duraflow_step_failed',
    );
    return rowCount > 0;
  }

  /** A task's steps: the completed ones in completion order, then the unfinished. */
  async listSteps(taskId: string): Promise<StepRun[]> {
    const { rows } = await this.db.query(
      `SELECT ${STEP_COLUMNS} FROM step_runs WHERE task_id = $1 ORDER BY completion_seq NULLS LAST, created_at, id`,
      [taskId],
    );
    return rows.map(toStepRun);
  }
}
