import { DeadLetter } from '../../domain/entities/dead-letter.entity';
import { SqlExecutor } from '../duraflow-database';
import { DEAD_LETTER_COLUMNS_OF_D, toDeadLetter } from '../row-mappers';

/** A dead letter with what a retry needs: its step's saved output and compensation name, its task's workflow and status. */
export interface DeadLetterForRetry {
  deadLetter: DeadLetter;
  /** Null when the step (and so its task) no longer exists: an orphaned entry. */
  stepKey: string | null;
  output: unknown;
  outputUndefined: boolean;
  compensationFn: string | null;
  /** The step row's kind and input: where its output was encoded (codec/decoded-rows.ts). */
  stepKind: string | null;
  stepInput: unknown;
  workflowName: string | null;
  taskStatus: string | null;
}

/** The dead letter `id` with its step and task, in one read (no lock); null when there is none. */
export async function readDeadLetterForRetry(executor: SqlExecutor, id: string): Promise<DeadLetterForRetry | null> {
  const { rows } = await executor.query(
    `SELECT ${DEAD_LETTER_COLUMNS_OF_D},
            s.step_key, s.output, s.output IS NULL AS output_undefined, s.compensation_fn, s.kind AS step_kind, s.input AS step_input,
            t.workflow_name, t.status AS task_status
     FROM dead_letter_queue d
     LEFT JOIN step_runs s ON s.id = d.step_id
     LEFT JOIN agent_tasks t ON t.id = d.task_id
     WHERE d.id = $1`,
    [id],
  );
  if (!rows.length) return null;
  const row = rows[0];
  return {
    deadLetter: toDeadLetter(row),
    stepKey: row.step_key,
    output: row.output,
    outputUndefined: row.output_undefined,
    compensationFn: row.compensation_fn,
    stepKind: row.step_kind ?? null,
    stepInput: row.step_input ?? null,
    workflowName: row.workflow_name,
    taskStatus: row.task_status,
  };
}
