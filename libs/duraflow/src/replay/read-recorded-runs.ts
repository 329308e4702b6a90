import { decodeStepOutput } from '../codec/decoded-rows';
import { PayloadCoder } from '../codec/payload-coder';
import type { SqlExecutor } from '../persistence/duraflow-database';
import { RecordedRun } from './recorded-run';

export interface RecordedRunsQuery {
  /** Only these workflows. Default: every workflow. */
  workflowNames?: string[];
  /**
   * Finished runs too (completed, failed, ...). Default false: the unfinished ones that recorded
   * steps, the runs a deploy would recover on its new code.
   */
  includeFinished?: boolean;
  /** Newest first, at most this many. Default 1000. */
  limit?: number;
}

/**
 * Reads recorded runs for the replay check: tasks that recorded at least one step, newest first,
 * each with its steps (input and outputs included: the check feeds them back). Read-only.
 */
export async function readRecordedRuns(
  executor: SqlExecutor,
  query: RecordedRunsQuery = {},
  coder: PayloadCoder = new PayloadCoder({ codec: undefined }),
): Promise<RecordedRun[]> {
  const limit = query.limit ?? 1000;
  if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`limit must be a whole number from 1, got ${limit}`);
  const { rows } = await executor.query<{
    id: string;
    workflow_name: string;
    workflow_version: number | null;
    status: string;
    input: unknown;
    retry_count: number | null;
    steps: Array<{
      step_key: string;
      status: string;
      output: unknown;
      output_undefined: boolean;
      completion_seq: number | null;
      kind: string | null;
      input: unknown;
    }>;
  }>(
    `SELECT t.id, t.workflow_name, t.workflow_version, t.status, t.input, t.retry_count,
            (SELECT json_agg(json_build_object('step_key', s.step_key, 'status', s.status, 'output', s.output,
                                               'output_undefined', s.output IS NULL, 'completion_seq', s.completion_seq, 'kind', s.kind,
                                               'input', CASE WHEN s.kind = 'child' THEN s.input END)
                             ORDER BY s.completion_seq NULLS LAST, s.created_at)
             FROM step_runs s WHERE s.task_id = t.id) AS steps
     FROM agent_tasks t
     WHERE t.deleted_at IS NULL
       AND ($1::boolean OR t.status IN ('pending', 'running'))
       AND ($2::varchar[] IS NULL OR t.workflow_name = ANY($2::varchar[]))
       AND EXISTS (SELECT 1 FROM step_runs s WHERE s.task_id = t.id)
     ORDER BY t.created_at DESC, t.id DESC
     LIMIT $3`,
    [query.includeFinished ?? false, query.workflowNames ?? null, limit],
  );
  return rows.map((row) => ({
    taskId: row.id,
    workflowName: row.workflow_name,
    workflowVersion: row.workflow_version,
    status: row.status,
    // With a codec (forRoot's, or the CLI's DURAFLOW_CODEC_KEYS), decoded: PayloadUnreadableError when no key opens one.
    input: coder.decode(row.id, 'input', row.input),
    retryCount: row.retry_count ?? 0,
    steps: (row.steps ?? []).map((step) => ({
      stepKey: step.step_key,
      status: step.status,
      ...(step.output_undefined ? {} : { output: decodeStepOutput(coder, row.id, step.kind, step.input, step.output) }),
      completionSeq: step.completion_seq,
      kind: step.kind,
    })),
  }));
}
