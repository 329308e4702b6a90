import { TASK_SUBMITTED_CHANNEL } from '../../duraflow.constants';
import { SqlExecutor } from '../duraflow-database';

/** What a send found: the task's status (null: no such task), and the signal's id when it was kept. */
export interface SentSignal {
  status: string | null;
  signalId: string | null;
  /** A wait of this name was pending: the task was made claimable now. */
  woke: boolean;
}

const ACCEPTING = new Set(['pending', 'running']);

/**
 * Keeps a signal for a task, in one transaction: the task row is locked first (as a run that
 * settles a wait locks it), so a run either takes the signal in its wait or has suspended
 * already and is woken here (`scheduled_at = now()` and a NOTIFY, so a worker claims it at
 * once). A finished task keeps nothing.
 */
export async function sendSignal(tx: SqlExecutor, taskId: string, name: string, payloadJson: string | null): Promise<SentSignal> {
  const task = await tx.query<{ status: string }>(`SELECT status FROM agent_tasks WHERE id = $1 FOR NO KEY UPDATE`, [taskId]);
  if (!task.rows.length) return { status: null, signalId: null, woke: false };
  const { status } = task.rows[0];
  if (!ACCEPTING.has(status)) return { status, signalId: null, woke: false };
  const kept = await tx.query<{ id: string }>(`INSERT INTO task_signals (task_id, name, payload) VALUES ($1, $2, $3::jsonb) RETURNING id`, [
    taskId,
    name,
    payloadJson,
  ]);
  const woken = await tx.query(
    `UPDATE agent_tasks t SET scheduled_at = now(), updated_at = now()
     WHERE t.id = $1 AND t.status = 'pending' AND t.rollback_reason IS NULL
       AND EXISTS (SELECT 1 FROM step_runs s
                   WHERE s.task_id = $1 AND s.kind = 'signal' AND s.status = 'waiting' AND s.input->>'name' = $2)
     RETURNING pg_notify('${TASK_SUBMITTED_CHANNEL}', t.workflow_name)`,
    [taskId, name],
  );
  return { status, signalId: String(kept.rows[0].id), woke: woken.rowCount > 0 };
}
