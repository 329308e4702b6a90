import { callbackSignalName } from '../../domain/reserved-keys';
import { SqlExecutor } from '../duraflow-database';
import { sendSignal } from './send-signal';
import { TERMINAL } from './task-lifecycle';

/** A callback's completion as it is written: the payload for its row and for the signal its wait takes (each as stored). */
export interface CallbackToComplete {
  callbackId: string;
  taskId: string;
  callbackPayloadJson: string | null;
  signalPayloadJson: string | null;
}

/** What the completion found: it won, or why nothing was written. */
export type CallbackCompletion = 'completed' | 'not-found' | 'already-completed' | 'expired' | 'task-finished';

/** A completion's signal is never refused for room: a task takes at most one per callback it opened. */
const NO_SIGNAL_BOUND = Number.MAX_SAFE_INTEGER;

/**
 * Completes a callback, in the caller's transaction: the task row is locked first (as a signal's
 * send and a run's settle lock it: the one row-lock order), then one conditional UPDATE moves
 * the callback from `open` to `completed` while it has not expired and its task has not
 * finished; two racing completions both reach it, the second after the first commits, and finds
 * it completed. The winner then sends the signal of the callback's reserved name to the task
 * (send-signal.ts, on the same transaction): the run's `waitForCallback` is a signal wait, so
 * its waking, its delivery to a suspended wait, its deadline and its recovery are the signal's.
 * A refusal writes nothing and says why.
 */
export async function completeCallback(tx: SqlExecutor, callback: CallbackToComplete): Promise<CallbackCompletion> {
  await tx.query(`/* duraflow_complete_callback_lock */ SELECT 1 FROM agent_tasks WHERE id = $1 FOR NO KEY UPDATE`, [callback.taskId]);
  const { rows } = await tx.query(
    `/* duraflow_complete_callback */
     UPDATE task_callbacks c SET status = 'completed', payload = $3::jsonb, completed_at = clock_timestamp()
     WHERE c.id = $1 AND c.task_id = $2 AND c.status = 'open' AND (c.expires_at IS NULL OR c.expires_at > duraflow_clock_timestamp())
       AND EXISTS (SELECT 1 FROM agent_tasks t WHERE t.id = $2 AND t.status NOT IN ${TERMINAL})
     RETURNING c.id`,
    [callback.callbackId, callback.taskId, callback.callbackPayloadJson],
  );
  if (rows.length) {
    const sent = await sendSignal(
      tx,
      callback.taskId,
      callbackSignalName(callback.callbackId),
      callback.signalPayloadJson,
      NO_SIGNAL_BOUND,
    );
    // Under the task's lock the task is unfinished, so the signal is kept: anything else is a bug, rolled back.
    if (!sent.signalId) throw new Error(`The signal of callback ${callback.callbackId} was not kept (task ${sent.status ?? 'missing'})`);
    return 'completed';
  }
  return refusal(tx, callback);
}

/** Why a completion wrote nothing, read under the same lock. */
async function refusal(tx: SqlExecutor, callback: CallbackToComplete): Promise<Exclude<CallbackCompletion, 'completed'>> {
  const { rows } = await tx.query(
    `SELECT c.status, c.expires_at IS NOT NULL AND c.expires_at <= duraflow_clock_timestamp() AS expired, t.status IN ${TERMINAL} AS task_finished
     FROM task_callbacks c LEFT JOIN agent_tasks t ON t.id = c.task_id
     WHERE c.id = $1 AND c.task_id = $2`,
    [callback.callbackId, callback.taskId],
  );
  if (!rows.length) return 'not-found';
  const row = rows[0];
  if (row.status === 'completed') return 'already-completed';
  if (row.status === 'expired' || row.expired === true) return 'expired';
  return 'task-finished';
}
