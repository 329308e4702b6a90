import { Injectable, Optional } from '@nestjs/common';
import { PayloadCoder } from '../codec/payload-coder';
import { DuraflowDatabase } from './duraflow-database';
import { ownedTaskRow } from './lifecycle/fencing';
import { storableJson } from '../validation/storable-text';
import { CompletedStep, completedStepParams, UPSERT_COMPLETED_STEP } from './step.store';

/** The levels of `ctx.log`. */
export type RunLogLevel = 'debug' | 'info' | 'warn' | 'error';

/** A line a run logged, not written yet. */
export interface PendingLogLine {
  level: RunLogLevel;
  message: string;
  /** The metadata as JSON text, or null. */
  metadataJson: string | null;
  stepKey: string | null;
  attempt: number | null;
  at: Date;
}

/** A line as `workflows.getLogs` returns it. */
export interface RunLogLine {
  seq: number;
  level: RunLogLevel;
  message: string;
  metadata: unknown;
  stepKey: string | null;
  attempt: number | null;
  at: Date;
}

/** The message of the last row of a task that logged more than `maxPerTask` lines. */
export const DROPPED_LINES_MESSAGE = 'log lines dropped (logs.maxPerTask reached); metadata.dropped counts them';

/** Lines to write with a checkpoint, in its statement: as JSON (`linesJson`), with the task's bound. */
export interface LogBatch {
  json: string;
  maxPerTask: number;
}

/**
 * The CTEs that write a batch of lines of task `task` when the CTE `gate` has a row: `json`,
 * `max` and `message` are the SQL parameters of the lines' JSON, maxPerTask and
 * DROPPED_LINES_MESSAGE. Placed after other CTEs (`, ` before it is the caller's).
 */
export function appendLogsCtes(task: string, gate: string, json: string, max: string, message: string): string {
  return `base AS (SELECT coalesce(max(seq), 0) AS n FROM task_logs WHERE task_id = ${task} AND seq <= ${max}),
       l AS (
         SELECT base.n + l.ord AS seq, l.line FROM base, jsonb_array_elements(${json}::jsonb) WITH ORDINALITY AS l(line, ord)
         WHERE EXISTS (SELECT 1 FROM ${gate})
       ),
       kept AS (
         INSERT INTO task_logs (task_id, seq, level, message, metadata, step_key, attempt, logged_at)
         SELECT ${task}, seq, line->>'level', line->>'message', line->'metadata', line->>'stepKey', (line->>'attempt')::int,
                (line->>'at')::timestamptz
         FROM l WHERE seq <= ${max}
       ),
       dropped AS (
         INSERT INTO task_logs (task_id, seq, level, message, metadata, logged_at)
         SELECT ${task}, ${max} + 1, 'warn', ${message}, jsonb_build_object('dropped', count(*)), clock_timestamp()
         FROM l WHERE seq > ${max} HAVING count(*) > 0
         ON CONFLICT (task_id, seq) DO UPDATE
         SET metadata = jsonb_build_object('dropped', (task_logs.metadata->>'dropped')::int + (EXCLUDED.metadata->>'dropped')::int),
             logged_at = EXCLUDED.logged_at
       )`;
}

/**
 * The statements of `task_logs`. A run's lines are numbered in the database after the task's
 * last (only the run that owns the task writes them, fenced on its claim); past `maxPerTask`
 * the oldest are kept and one more row (seq maxPerTask + 1, level warn) counts those dropped.
 */
@Injectable()
export class RunLogStore {
  constructor(
    private readonly db: DuraflowDatabase,
    @Optional() private readonly coder?: PayloadCoder,
  ) {}

  /** A line's metadata as it is stored: encoded under the task with a codec (its level, message, step key stay readable). */
  encodeMetadata(taskId: string, metadataJson: string | null): string | null {
    return this.coder ? this.coder.encodeJson(taskId, 'log', metadataJson) : metadataJson;
  }

  /** Writes `lines` of the task `taskId` while the claim owns it: false when it no longer does. */
  async append(taskId: string, claimToken: string, lines: PendingLogLine[], maxPerTask: number): Promise<boolean> {
    const { rows } = await this.db.query<{ owned: boolean }>(
      `WITH owner AS (${ownedTaskRow('$1', '$2')}),
       ${appendLogsCtes('$1', 'owner', '$3', '$4', '$5')}
       SELECT EXISTS (SELECT 1 FROM owner) AS owned`,
      [taskId, claimToken, linesJson(lines), maxPerTask, DROPPED_LINES_MESSAGE],
      'duraflow_logs_appended',
    );
    return rows[0]?.owned === true;
  }

  /**
   * A step's checkpoint (as `upsertCompletedStep`) with the run's pending log lines, in one
   * statement: the lines are written only if the step's row is (a step completed already, or a
   * claim lost, writes neither), so a retried statement whose first try committed adds none.
   */
  async upsertCompletedStepWithLogs(step: CompletedStep, logs: LogBatch): Promise<boolean> {
    const { rows } = await this.db.query<{ written: boolean }>(
      `WITH s AS (${UPSERT_COMPLETED_STEP} RETURNING id),
       ${appendLogsCtes('$1', 's', '$9', '$10', '$11')}
       SELECT EXISTS (SELECT 1 FROM s) AS written`,
      [...completedStepParams(step), logs.json, logs.maxPerTask, DROPPED_LINES_MESSAGE],
      'duraflow_step_completed_logs',
    );
    return rows[0]?.written === true;
  }

  /** A task's lines after `afterSeq`, in order, at most `limit`. */
  async page(taskId: string, afterSeq: number, limit: number): Promise<RunLogLine[]> {
    const { rows } = await this.db.query(
      `SELECT seq, level, message, metadata, step_key, attempt, logged_at
       FROM task_logs WHERE task_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
      [taskId, afterSeq, limit],
      'duraflow_logs_page',
    );
    return rows.map((row) => ({
      seq: row.seq,
      level: row.level,
      message: row.message,
      metadata: this.coder && row.metadata ? this.coder.tryDecode(taskId, 'log', row.metadata).value : (row.metadata ?? null),
      stepKey: row.step_key ?? null,
      attempt: row.attempt ?? null,
      at: row.logged_at,
    }));
  }
}

/** The lines as one JSON array (metadata inlined as JSON, not as a string). */
export function linesJson(lines: PendingLogLine[]): string {
  const items = lines.map(
    (line) =>
      `{"level":${JSON.stringify(line.level)},"message":${JSON.stringify(line.message)},"metadata":${line.metadataJson ?? 'null'},` +
      `"stepKey":${JSON.stringify(line.stepKey)},"attempt":${JSON.stringify(line.attempt)},"at":${JSON.stringify(line.at.toISOString())}}`,
  );
  return storableJson(`[${items.join(',')}]`);
}
