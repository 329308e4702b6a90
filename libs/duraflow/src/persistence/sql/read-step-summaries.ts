import { decodeError, stepOutputOrigin } from '../../codec/decoded-rows';
import { CANNOT_DECRYPT, PayloadCoder } from '../../codec/payload-coder';
import { JsonPreview, StepSummary } from '../../domain/task-summaries';
import { SqlExecutor } from '../duraflow-database';

/**
 * A task's steps in `StepStore.listSteps` order, their input and output cut to `previewChars` in
 * the database: a task of many steps with outputs of MiBs reads a few KiB per step.
 */
export async function readStepSummaries(
  db: SqlExecutor,
  taskId: string,
  previewChars: number,
  coder?: PayloadCoder,
): Promise<StepSummary[]> {
  if (coder?.encoding) return readDecodedStepSummaries(db, taskId, previewChars, coder);
  const { rows } = await db.query(
    `SELECT id, task_id, step_key, status, error, compensation_fn, compensated_at, started_at, completed_at,
              created_at, attempt, completion_seq, kind, wake_at,
              left(i.pretty, $2) AS input_text, char_length(i.pretty) > $2 AS input_truncated, octet_length(input::text) AS input_bytes,
              left(o.pretty, $2) AS output_text, char_length(o.pretty) > $2 AS output_truncated, octet_length(output::text) AS output_bytes
       FROM step_runs
       CROSS JOIN LATERAL (SELECT jsonb_pretty(input) AS pretty) i
       CROSS JOIN LATERAL (SELECT jsonb_pretty(output) AS pretty) o
       WHERE task_id = $1
       ORDER BY completion_seq NULLS LAST, created_at, id`,
    [taskId, previewChars],
  );
  return rows.map((row) => ({
    id: row.id,
    taskId: row.task_id,
    stepKey: row.step_key,
    status: row.status,
    attempt: row.attempt ?? 0,
    error: row.error,
    compensationFn: row.compensation_fn,
    compensatedAt: row.compensated_at,
    startedAt: row.started_at,
    completedAt: row.completed_at,
    createdAt: row.created_at,
    completionSeq: row.completion_seq,
    kind: row.kind ?? null,
    wakeAt: row.wake_at ?? null,
    input: jsonPreview(row.input_text, row.input_truncated, row.input_bytes),
    output: jsonPreview(row.output_text, row.output_truncated, row.output_bytes),
  }));
}

function jsonPreview(text: string | null, truncated: boolean | null, bytes: number | null): JsonPreview | null {
  return text === null ? null : { text, truncated: truncated === true, bytes: Number(bytes) };
}

/**
 * With a codec the database holds only ciphertext: the steps are read whole and their previews
 * cut here from the decoded values (a value no key opens shows `[cannot decrypt]`).
 */
async function readDecodedStepSummaries(
  db: SqlExecutor,
  taskId: string,
  previewChars: number,
  coder: PayloadCoder,
): Promise<StepSummary[]> {
  const { rows } = await db.query(
    `SELECT id, task_id, step_key, status, error, compensation_fn, compensated_at, started_at, completed_at,
            created_at, attempt, completion_seq, kind, wake_at, input, output
     FROM step_runs WHERE task_id = $1
     ORDER BY completion_seq NULLS LAST, created_at, id`,
    [taskId],
  );
  const preview = (value: unknown): JsonPreview | null => {
    if (value === null || value === undefined) return null;
    const text = JSON.stringify(value, null, 2);
    return { text: text.slice(0, previewChars), truncated: text.length > previewChars, bytes: Buffer.byteLength(text) };
  };
  return rows.map((row) => {
    const origin = stepOutputOrigin(taskId, row.kind, row.input);
    const output = coder.tryDecode(origin.taskId, origin.field, row.output);
    const error = viewableStepError(coder, taskId, row.error);
    return {
      id: row.id,
      taskId: row.task_id,
      stepKey: row.step_key,
      status: row.status,
      attempt: row.attempt ?? 0,
      error,
      compensationFn: row.compensation_fn,
      compensatedAt: row.compensated_at,
      startedAt: row.started_at,
      completedAt: row.completed_at,
      createdAt: row.created_at,
      completionSeq: row.completion_seq,
      kind: row.kind ?? null,
      wakeAt: row.wake_at ?? null,
      input: preview(row.input),
      output: output.unreadable ? { text: CANNOT_DECRYPT, truncated: false, bytes: 0 } : preview(output.value),
    };
  });
}

function viewableStepError(coder: PayloadCoder, taskId: string, stored: Record<string, unknown> | null): Record<string, unknown> | null {
  try {
    return decodeError(coder, taskId, stored);
  } catch {
    return { ...stored, message: CANNOT_DECRYPT };
  }
}
