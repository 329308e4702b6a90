import { TASK_SUBMITTED_CHANNEL } from '../../duraflow.constants';
import { SqlExecutor } from '../duraflow-database';
import { textLiteral } from '../literals';

/** What a send found: the task's status (null: no such task), and the signal's id when it was kept. */
export interface SentSignal {
  status: string | null;
  signalId: string | null;
  /** A wait of this name was pending: the task was made claimable now. */
  woke: boolean;
}

/**
 * Keeps a signal for a task, in one round trip and one transaction (two statements sent
 * together over the simple query protocol, one implicit transaction): the first locks the task
 * row (as a run that settles a wait locks it); the second, with a snapshot taken after that
 * lock, keeps the signal unless the task finished and, when the task is suspended waiting for
 * this name, wakes it (`scheduled_at = now()` and a NOTIFY, so a worker claims it at once). So a
 * run either takes the signal in its wait or has suspended already and is woken here. A
 * finished task keeps nothing. Values go in as literals (the protocol carries no parameters).
 */
export async function sendSignal(executor: SqlExecutor, taskId: string, name: string, payloadJson: string | null): Promise<SentSignal> {
  const task = `${textLiteral(taskId)}::uuid`;
  const signal = textLiteral(name);
  const { rows } = await executor.query(
    `/* duraflow_send_signal */ SELECT 1 FROM agent_tasks WHERE id = ${task} FOR NO KEY UPDATE;
     WITH target AS (
       SELECT status, workflow_name, rollback_reason FROM agent_tasks WHERE id = ${task}
     ), kept AS (
       INSERT INTO task_signals (task_id, name, payload)
       SELECT ${task}, ${signal}, ${payloadJson === null ? 'NULL' : `${textLiteral(payloadJson)}::jsonb`}
       FROM target WHERE status IN ('pending', 'running')
       RETURNING id
     ), woken AS (
       UPDATE agent_tasks t SET scheduled_at = now(), updated_at = now()
       FROM target
       WHERE t.id = ${task} AND target.status = 'pending' AND target.rollback_reason IS NULL AND EXISTS (SELECT 1 FROM kept)
         AND EXISTS (SELECT 1 FROM step_runs s
                     WHERE s.task_id = ${task} AND s.kind = 'signal' AND s.status = 'waiting' AND s.input->>'name' = ${signal})
       RETURNING pg_notify('${TASK_SUBMITTED_CHANNEL}', t.workflow_name)
     )
     SELECT target.status, (SELECT id FROM kept) AS signal_id, (SELECT count(*) FROM woken) AS woke FROM target`,
  );
  if (!rows.length) return { status: null, signalId: null, woke: false };
  const row = rows[0];
  return { status: row.status, signalId: row.signal_id === null ? null : String(row.signal_id), woke: Number(row.woke) > 0 };
}
