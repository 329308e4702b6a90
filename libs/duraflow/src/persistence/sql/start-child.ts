import { TASK_SUBMITTED_CHANNEL } from '../../domain/duraflow.constants';
import { SqlExecutor } from '../duraflow-database';
import { ownedBy } from '../fencing';
import { NO_WAKE_UP } from './settle-wait';

/** The compensation name a child's step row carries: rolling the parent back rolls the child back (saga-executor.ts). */
export const CHILD_COMPENSATION = 'duraflow:child';

export interface ChildToStart {
  parentTaskId: string;
  claimToken: string;
  stepKey: string;
  /** runChild: the row stays `waiting` until the child ends. startChild: it is completed at once with `{ id }`. */
  wait: boolean;
  workflowName: string;
  inputJson: string;
  priority: number;
  scheduledAt: Date | null;
  maxRetries: number;
  /** Derived from the parent and the step key: a second start of the same child finds the first. */
  idempotencyKey: string;
  completionSeq: number;
  /** The child workflow's declared version (the newest this process registers); null when it declares none. */
  workflowVersion: number | null;
  /** Flow control's key of the child's input; null for a workflow without limits. */
  concurrencyKey: string | null;
  /** The parent's stored trace context (JSON), so the child's runs join the trace the parent was submitted in; null without one. */
  traceContextJson: string | null;
}

/**
 * Starts a child task and records it as the parent's step in one transaction under the
 * parent's claim (for runChild, the parent is suspended in it too): a crash between the two writes leaves neither, and the child's idempotency
 * key (the parent's id and the step key) makes a retry of a commit whose reply was lost find
 * the child it made. Null when the claim no longer owns the parent.
 */
export async function startChild(tx: SqlExecutor, child: ChildToStart): Promise<{ childTaskId: string } | null> {
  const owned = await tx.query(`SELECT 1 FROM agent_tasks WHERE ${ownedBy('$1', '$2')} FOR NO KEY UPDATE`, [
    child.parentTaskId,
    child.claimToken,
  ]);
  if (!owned.rowCount) return null;
  const inserted = await tx.query<{ id: string }>(
    `WITH inserted AS (
       INSERT INTO agent_tasks (workflow_name, input, priority, scheduled_at, max_retries, idempotency_key, parent_task_id, parent_step_key,
                                workflow_version, concurrency_key, trace_context)
       VALUES ($1, $2::jsonb, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb)
       ON CONFLICT (workflow_name, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
       RETURNING id, workflow_name, scheduled_at
     )
     SELECT id, CASE WHEN scheduled_at IS NULL OR scheduled_at <= now()
                     THEN pg_notify('${TASK_SUBMITTED_CHANNEL}', workflow_name) END AS notified
     FROM inserted`,
    [
      child.workflowName,
      child.inputJson,
      child.priority,
      child.scheduledAt,
      child.maxRetries,
      child.idempotencyKey,
      child.parentTaskId,
      child.stepKey,
      child.workflowVersion,
      child.concurrencyKey,
      child.traceContextJson,
    ],
  );
  let childTaskId = inserted.rows[0]?.id;
  if (!childTaskId) {
    const existing = await tx.query<{ id: string }>(`SELECT id FROM agent_tasks WHERE workflow_name = $1 AND idempotency_key = $2`, [
      child.workflowName,
      child.idempotencyKey,
    ]);
    childTaskId = existing.rows[0].id;
  }
  await tx.query(
    `INSERT INTO step_runs (task_id, step_key, kind, status, input, output, compensation_fn, completion_seq, attempt, started_at, completed_at)
     VALUES ($1, $2, 'child', $3::varchar, $4::jsonb, $5::jsonb, $6, $7, 1, clock_timestamp(),
             CASE WHEN $3::varchar = 'completed' THEN clock_timestamp() END)
     ON CONFLICT (task_id, step_key) DO NOTHING`,
    [
      child.parentTaskId,
      child.stepKey,
      child.wait ? 'waiting' : 'completed',
      JSON.stringify({ workflowName: child.workflowName, childTaskId }),
      child.wait ? null : JSON.stringify({ id: childTaskId }),
      CHILD_COMPENSATION,
      child.wait ? null : child.completionSeq,
    ],
  );
  if (child.wait) {
    // runChild: the child is not visible before this commits, so it cannot have ended: the
    // parent waits from here (its wake-up is the trigger that the child's end fires).
    await tx.query(
      `UPDATE agent_tasks
       SET status = 'pending', scheduled_at = $3, worker_id = NULL, claim_token = NULL, heartbeat_at = NULL, updated_at = now()
       WHERE ${ownedBy('$1', '$2')}`,
      [child.parentTaskId, child.claimToken, NO_WAKE_UP],
    );
  }
  return { childTaskId };
}
