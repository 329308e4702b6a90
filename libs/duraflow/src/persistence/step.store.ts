import { Injectable, Optional } from '@nestjs/common';
import { decodedStep, decodeStepFieldsLazily } from '../codec/decoded-rows';
import { PayloadCoder } from '../codec/payload-coder';
import { StepRun } from '../domain/entities/step-run.entity';
import { DuraflowDatabase } from './duraflow-database';
import { ownedTaskRow, ownedTaskRows } from './lifecycle/fencing';
import { deadLettered } from './lifecycle/rollback-rules';
import { STEP_COLUMNS, toStepRun } from './row-mappers';

/** What a run needs to know of a step it may have run before. */
export interface StepMemo {
  stepKey: string;
  status: string;
  output: unknown;
  /** The step returned `undefined` (stored as SQL NULL, unlike a JSON `null`). */
  outputUndefined: boolean;
  attempt: number;
  /** Its place in the run's completion order, when completed. */
  completionSeq: number | null;
  /** Completed, with a compensation that has not run yet: a rollback would undo it. */
  compensable: boolean;
  /** A durable primitive's row (`sleep`, `signal`, `child`); null for an ordinary step. */
  kind?: string | null;
  /** A sleep's end or a signal wait's deadline. */
  wakeAt?: Date | null;
  /** What the row records of the wait (a signal's name, a child's id). */
  input?: unknown;
  /** A wait that ended in error (a signal's timeout, a child that failed). */
  error?: Record<string, unknown> | null;
}

/** A step's completion, as its run writes it (fenced on the run's claim). */
export interface CompletedStep {
  taskId: string;
  claimToken: string;
  stepKey: string;
  outputJson: string | null;
  compensationFn: string | null;
  attempt: number;
  startedAt: Date;
  /** Its place in the run's completion order (the run counts; only its owner writes). */
  completionSeq: number;
}

/** $1–$8 of UPSERT_COMPLETED_STEP / INSERT_COMPLETED_STEP, in their order (statements that extend them number theirs from $9). */
export function completedStepParams(s: CompletedStep): unknown[] {
  return [s.taskId, s.stepKey, s.claimToken, s.outputJson, s.compensationFn, s.attempt, s.startedAt, s.completionSeq];
}

/** A failed attempt of a step, as its run writes it (fenced on the run's claim). */
export interface FailedStepAttempt {
  taskId: string;
  claimToken: string;
  stepKey: string;
  errorJson: string;
  attempt: number;
  startedAt: Date;
}

/** An attempt of a step about to start (the step option `recordStart`), as its run writes it (fenced on the run's claim). */
export type StartedStepAttempt = Omit<FailedStepAttempt, 'errorJson'>;

/** The claim a write is fenced on: it lands only while this claim owns its running task. */
export interface ClaimFence {
  taskId: string;
  claimToken: string;
}

/** A completed step with a compensation, as a rollback sees it. */
export interface CompensableStep {
  id: string;
  stepKey: string;
  output: unknown;
  outputUndefined: boolean;
  compensationFn: string;
  compensated: boolean;
  /** It already has an open dead letter: it failed for good in an earlier rollback run. */
  deadLettered: boolean;
}

const OWNED_TASK = ownedTaskRow('$1', '$3');
export const UNIQUE_VIOLATION = '23505';
/** One step written `completed` while the claim ($1 task, $3 token) owns its task: nothing otherwise. */
const INSERT_COMPLETED_STEP = `INSERT INTO step_runs (task_id, step_key, status, output, compensation_fn, attempt, started_at, completed_at, completion_seq)
       SELECT $1, $2, 'completed', $4::jsonb, $5, $6, $7, duraflow_clock_timestamp(), $8
       FROM (${OWNED_TASK}) owner`;

/** The same over a row that may exist (parameters $1..$8 as INSERT_COMPLETED_STEP's): a completed row is never overwritten. */
export const UPSERT_COMPLETED_STEP = `${INSERT_COMPLETED_STEP}
       ON CONFLICT (task_id, step_key) DO UPDATE
       SET status = 'completed', output = EXCLUDED.output, error = NULL, compensation_fn = EXCLUDED.compensation_fn,
           attempt = EXCLUDED.attempt, started_at = EXCLUDED.started_at, completed_at = EXCLUDED.completed_at,
           completion_seq = EXCLUDED.completion_seq
       WHERE step_runs.status <> 'completed'`;

/**
 * Sets a step's `compensated_at`, once (it is never cleared), for the step `stepId` (an SQL
 * expression) when `fence` holds: the rollback's claim owns the task, or the dead letter of the
 * step was just removed by the retry that ran its compensation.
 */
export function markCompensatedSql(stepId: string, fence: string): string {
  return `UPDATE step_runs SET compensated_at = clock_timestamp()
          WHERE id = ${stepId} AND compensated_at IS NULL AND ${fence}`;
}

/**
 * The statements that write `step_runs` (a run's checkpoints, a rollback's marks, each fenced on its run's claim through
 * fencing.ts) and read it (payloads decoded). `agent_tasks` is read only through fencing.ts, `dead_letter_queue` rollback-rules.ts.
 */
@Injectable()
export class StepStore {
  constructor(
    private readonly db: DuraflowDatabase,
    @Optional() private readonly coder?: PayloadCoder,
  ) {}

  async loadStepMemos(taskId: string): Promise<Map<string, StepMemo>> {
    const { rows } = await this.db.query(
      `SELECT step_key, status, output, output IS NULL AS output_undefined, attempt, completion_seq,
              (status = 'completed' AND compensation_fn IS NOT NULL AND compensated_at IS NULL) AS compensable,
              kind, wake_at, CASE WHEN kind IS NOT NULL THEN input END AS input, CASE WHEN kind IS NOT NULL THEN error END AS error
       FROM step_runs WHERE task_id = $1`,
      [taskId],
      'duraflow_load_steps',
    );
    return new Map(
      rows.map((row) => [
        row.step_key,
        decodeStepFieldsLazily(this.coder, taskId, row.kind, row.input, {
          stepKey: row.step_key,
          status: row.status,
          output: row.output,
          outputUndefined: row.output_undefined,
          attempt: row.attempt ?? 0,
          completionSeq: row.completion_seq,
          compensable: row.compensable,
          kind: row.kind,
          wakeAt: row.wake_at,
          input: row.input,
          error: row.error,
        }),
      ]),
    );
  }

  /**
   * The checkpoint of a step whose row may exist already (a failed attempt was written, or a
   * first write landed and its reply was lost): one fenced upsert writes it `completed` with
   * its output. A completed row is never overwritten. Returns false when nothing was written
   * (the claim no longer owns the task, or the step was completed already).
   */
  async upsertCompletedStep(step: CompletedStep): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `${UPSERT_COMPLETED_STEP}
       RETURNING id`,
      completedStepParams(step),
      'duraflow_step_completed',
    );
    return rowCount > 0;
  }

  /**
   * The common checkpoint, for the first completion of steps of one or many runs: a plain
   * multi-row insert (no speculative insertion), each row fenced on its own claim, in one
   * statement and one commit. Returns, per step, whether it was written (false: its claim no
   * longer owns the task). Throws a unique violation (23505) when a row already exists.
   */
  async insertCompletedSteps(steps: CompletedStep[]): Promise<boolean[]> {
    if (steps.length === 1) {
      // A lone checkpoint (an idle process): the simplest plan, the lowest latency.
      const [step] = steps;
      const { rowCount } = await this.db.query(INSERT_COMPLETED_STEP, completedStepParams(step), 'duraflow_step_inserted');
      return [rowCount > 0];
    }
    const { rows } = await this.db.query<{ task_id: string; step_key: string }>(
      `WITH c AS (
         SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::varchar[], $4::jsonb[], $5::text[], $6::int[], $7::timestamptz[], $8::int[])
           AS c(task_id, claim_token, step_key, output, compensation_fn, attempt, started_at, completion_seq)
       ), owner AS (${ownedTaskRows('c', 'SHARE')})
       INSERT INTO step_runs (task_id, step_key, status, output, compensation_fn, attempt, started_at, completed_at, completion_seq)
       SELECT c.task_id, c.step_key, 'completed', c.output, c.compensation_fn, c.attempt, c.started_at, duraflow_clock_timestamp(), c.completion_seq
       FROM c JOIN owner ON owner.id = c.task_id AND owner.claim_token = c.claim_token
       RETURNING task_id, step_key`,
      [
        steps.map((step) => step.taskId),
        steps.map((step) => step.claimToken),
        steps.map((step) => step.stepKey),
        steps.map((step) => step.outputJson),
        steps.map((step) => step.compensationFn),
        steps.map((step) => step.attempt),
        steps.map((step) => step.startedAt),
        steps.map((step) => step.completionSeq),
      ],
      'duraflow_steps_inserted',
    );
    const written = new Set(rows.map((row) => `${row.task_id}/${row.step_key}`));
    return steps.map((step) => written.has(`${step.taskId}/${step.stepKey}`));
  }

  /**
   * Fenced: a step's attempt starts (the step option `recordStart`): its row is written `running`
   * with the attempt and `started_at` before the body runs, so a crash leaves it listed as
   * started, never finished. A completed row is never touched.
   */
  async recordStepStarted(step: StartedStepAttempt): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `INSERT INTO step_runs (task_id, step_key, status, attempt, started_at)
       SELECT $1, $2, 'running', $4, $5
       FROM (${OWNED_TASK}) owner
       ON CONFLICT (task_id, step_key) DO UPDATE
       SET status = 'running', attempt = EXCLUDED.attempt, started_at = EXCLUDED.started_at
       WHERE step_runs.status <> 'completed'
       RETURNING id`,
      [step.taskId, step.stepKey, step.claimToken, step.attempt, step.startedAt],
      'duraflow_step_started',
    );
    return rowCount > 0;
  }

  /** Fenced: records a failed attempt (the error and the attempt number). */
  async recordStepFailed(step: FailedStepAttempt): Promise<boolean> {
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

  /**
   * The steps a rollback undoes, in the order it undoes them: LIFO by completion time, ties
   * broken by the order the run completed them (two steps can complete within one clock tick).
   */
  async listCompensableSteps(taskId: string): Promise<CompensableStep[]> {
    const { rows } = await this.db.query(
      `SELECT s.id, s.step_key, s.output, s.output IS NULL AS output_undefined, s.compensation_fn, s.kind, s.input,
              s.compensated_at IS NOT NULL AS compensated,
              ${deadLettered('s')} AS dead_lettered
       FROM step_runs s
       WHERE s.task_id = $1 AND s.status = 'completed' AND s.compensation_fn IS NOT NULL
       ORDER BY s.completed_at DESC, s.completion_seq DESC NULLS LAST`,
      [taskId],
      'duraflow_compensable_steps',
    );
    return rows.map((row) =>
      decodeStepFieldsLazily(this.coder, taskId, row.kind, row.input, {
        id: row.id,
        stepKey: row.step_key,
        output: row.output,
        outputUndefined: row.output_undefined,
        compensationFn: row.compensation_fn,
        compensated: row.compensated,
        deadLettered: row.dead_lettered,
      }),
    );
  }

  /**
   * The compensation of the step `stepId` of task `taskId` succeeded: `compensated_at` set, once
   * (never cleared), fenced on the claim of the rollback that ran it (`fence`: the task's own, or
   * its parent's when a parent rolls back a finished child).
   */
  async markCompensated(taskId: string, stepId: string, fence: ClaimFence): Promise<boolean> {
    const { rowCount } = await this.db.query(
      markCompensatedSql('$2', `task_id = $1 AND EXISTS (${ownedTaskRow('$3', '$4')})`),
      [taskId, stepId, fence.taskId, fence.claimToken],
      'duraflow_step_compensated',
    );
    return rowCount > 0;
  }

  /** A task's steps: the completed ones in completion order, then the unfinished. */
  async listSteps(taskId: string): Promise<StepRun[]> {
    const { rows } = await this.db.query(
      `SELECT ${STEP_COLUMNS} FROM step_runs WHERE task_id = $1 ORDER BY completion_seq NULLS LAST, created_at, id`,
      [taskId],
    );
    return rows.map((row) => decodedStep(this.coder, toStepRun(row)));
  }

  /** One step of a task, by its key, with its whole input and output. */
  async findStep(taskId: string, stepKey: string): Promise<StepRun | null> {
    const { rows } = await this.db.query(`SELECT ${STEP_COLUMNS} FROM step_runs WHERE task_id = $1 AND step_key = $2`, [taskId, stepKey]);
    return rows.length ? decodedStep(this.coder, toStepRun(rows[0])) : null;
  }
}
