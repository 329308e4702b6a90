import { SqlExecutor } from '../duraflow-database';
import { ownedBy } from '../fencing';

/** The wake-up time of a task that waits with no deadline (a signal without timeout, a child): the claim never reaches it. */
export const NO_WAKE_UP = new Date('9999-12-31T00:00:00.000Z');

/** A sleep, a signal wait or a child wait reached by a run, as the run settles it. */
export interface WaitToSettle {
  taskId: string;
  claimToken: string;
  stepKey: string;
  kind: 'sleep' | 'signal' | 'child';
  /** A sleep: when it ends. A signal wait: its deadline (null: none). A child wait: null. */
  wakeAt: Date | null;
  signalName?: string;
  childTaskId?: string;
  /** What the row records of the wait (a sleep's duration, a signal's name, a child's id). */
  inputJson: string | null;
  /** The completion_seq the row gets if the wait is over now. */
  completionSeq: number;
}

export type WaitSettlement =
  | { outcome: 'completed'; output: unknown; outputUndefined: boolean }
  | { outcome: 'failed'; error: Record<string, unknown> }
  | { outcome: 'waiting'; wakeAt: Date }
  | { outcome: 'lost' };

const TERMINAL = `('completed', 'failed', 'cancelled', 'rolled_back', 'partial_rollback')`;

/**
 * One transaction, under the run's claim: the task row is locked first (FOR NO KEY UPDATE, as
 * a signal's send and a child's end lock it), then the wait is judged on what is committed now:
 * a due sleep, the oldest undelivered signal of the name (taken, once), a passed deadline, a
 * child that ended. Over: the wait's row is written completed (or failed) and the run goes on.
 * Not over: the row is written `waiting` and the task goes back to `pending` with `scheduled_at`
 * at its wake-up time, its claim cleared (no slot, worker or heartbeat). Since a send and a
 * child's end lock the same row before they wake a waiting task, a wake-up is never missed.
 */
export async function settleWait(tx: SqlExecutor, wait: WaitToSettle): Promise<WaitSettlement> {
  // The transaction commits without waiting for its WAL flush, as the claim does: a settle lost
  // in a server crash leaves the task running under its claim (the reaper recovers it) and the
  // wait unsettled, and the replay settles it the same way (the same oldest signal is still
  // undelivered); each later checkpoint of the run flushes the WAL up to itself, this included.
  const owned = await tx.query(
    `SELECT set_config('synchronous_commit', 'off', true) FROM agent_tasks WHERE ${ownedBy('$1', '$2')} FOR NO KEY UPDATE`,
    [wait.taskId, wait.claimToken],
  );
  if (!owned.rowCount) return { outcome: 'lost' };

  let settled: Exclude<WaitSettlement, { outcome: 'waiting' | 'lost' }> | undefined;
  let outputJson: string | null = null;
  let errorJson: string | null = null;
  if (wait.kind === 'signal') {
    const taken = await tx.query(
      `UPDATE task_signals SET consumed_at = clock_timestamp(), consumed_by_step = $3
       WHERE id = (SELECT id FROM task_signals WHERE task_id = $1 AND name = $2 AND consumed_at IS NULL ORDER BY id LIMIT 1)
       RETURNING payload::text AS payload_json, payload`,
      [wait.taskId, wait.signalName, wait.stepKey],
    );
    if (taken.rows.length) {
      outputJson = taken.rows[0].payload_json;
      settled = { outcome: 'completed', output: taken.rows[0].payload, outputUndefined: outputJson === null };
    }
  } else if (wait.kind === 'child') {
    const child = await tx.query(
      `SELECT status, output::text AS output_json, output, error FROM agent_tasks WHERE id = $1 AND status IN ${TERMINAL}`,
      [wait.childTaskId],
    );
    if (child.rows.length) {
      const row = child.rows[0];
      if (row.status === 'completed') {
        outputJson = row.output_json;
        settled = { outcome: 'completed', output: row.output, outputUndefined: outputJson === null };
      } else {
        const error = { code: 'CHILD_WORKFLOW_FAILED', childTaskId: wait.childTaskId, status: row.status, childError: row.error };
        errorJson = JSON.stringify(error);
        settled = { outcome: 'failed', error };
      }
    }
  }
  if (!settled && wait.wakeAt) {
    const due = await tx.query<{ due: boolean }>(`SELECT $1::timestamptz <= clock_timestamp() AS due`, [wait.wakeAt]);
    if (due.rows[0].due) {
      if (wait.kind === 'sleep') settled = { outcome: 'completed', output: null, outputUndefined: true };
      else {
        const error = { code: 'SIGNAL_TIMEOUT', signalName: wait.signalName, deadline: wait.wakeAt.toISOString() };
        errorJson = JSON.stringify(error);
        settled = { outcome: 'failed', error };
      }
    }
  }

  const status = settled ? settled.outcome : 'waiting';
  await tx.query(
    `INSERT INTO step_runs (task_id, step_key, kind, status, input, output, error, wake_at, completion_seq, attempt, started_at, completed_at)
     VALUES ($1, $2, $3, $4::varchar, $5::jsonb, $6::jsonb, $7::jsonb, $8, $9, 1, clock_timestamp(),
             CASE WHEN $4::varchar = 'waiting' THEN NULL ELSE clock_timestamp() END)
     ON CONFLICT (task_id, step_key) DO UPDATE
     SET status = EXCLUDED.status, output = EXCLUDED.output, error = EXCLUDED.error,
         completion_seq = EXCLUDED.completion_seq, completed_at = EXCLUDED.completed_at
     WHERE step_runs.status = 'waiting'`,
    [
      wait.taskId,
      wait.stepKey,
      wait.kind,
      status,
      wait.inputJson,
      outputJson,
      errorJson,
      wait.wakeAt,
      status === 'completed' ? wait.completionSeq : null,
    ],
  );
  if (settled) return settled;

  const wakeAt = wait.wakeAt ?? NO_WAKE_UP;
  await tx.query(
    `UPDATE agent_tasks
     SET status = 'pending', scheduled_at = $3, worker_id = NULL, claim_token = NULL, heartbeat_at = NULL, updated_at = now()
     WHERE ${ownedBy('$1', '$2')}`,
    [wait.taskId, wait.claimToken, wakeAt],
  );
  return { outcome: 'waiting', wakeAt };
}
