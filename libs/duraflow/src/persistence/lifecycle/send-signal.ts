import { TASK_SUBMITTED_CHANNEL } from '../../domain/duraflow.constants';
import { SqlExecutor } from '../duraflow-database';
import { textLiteral } from '../literals';
import { oldestKeptSignal, waitCompletionSeq } from './signal-delivery';
import { MOVE } from './task-lifecycle';

/** What a send found: the task's status (null: no such task), and the signal's id when it was kept. */
export interface SentSignal {
  status: string | null;
  signalId: string | null;
  /** The task already kept `maxKept` signals no wait had taken: nothing was written. */
  full: boolean;
  /** A wait of this name was pending: the task was made claimable now. */
  woke: boolean;
}

/**
 * Keeps a signal for a task, in one round trip and one transaction (two statements sent
 * together over the simple query protocol, one implicit transaction): the first locks the task
 * row (as a run that settles a wait locks it, and a claim that takes it); the second, with a
 * snapshot taken after that lock, keeps the signal unless the task finished and, when the task
 * is suspended waiting for this name, wakes it (`scheduled_at = now()` and a NOTIFY, so a worker
 * claims it at once). So a run either takes the signal in its wait or has suspended already and
 * is woken here. A finished task keeps nothing. Values go in as literals (the protocol carries
 * no parameters).
 *
 * Delivered at once: when the suspended task's oldest waiting wait of this name is still before
 * its deadline and no older signal of the name is kept, this send settles that wait itself, as
 * the run's settle would (the signal is taken by that wait, the wait's row completed with the
 * payload), so the woken run finds the wait over in the steps it reads and goes on without a
 * settle of its own. Only while the task is `pending` (no claim, so no run can settle the wait
 * meanwhile: a claim waits for this lock, and a run that claimed it first makes the task
 * `running`, and then its own settle takes the kept signal).
 *
 * Bounded: a task keeps at most `maxKept` signals that no wait has taken; a send beyond it keeps
 * nothing and wakes nothing (`full`). Counted by the second statement, whose snapshot is taken
 * once the row lock is held: every send and settle of the task before it has committed, so
 * concurrent sends never keep more than `maxKept`. A signal handed to a waiting wait at once is
 * not kept and passes; signals a wait took do not count (each is a wait the workflow reached).
 */
export async function sendSignal(
  executor: SqlExecutor,
  taskId: string,
  name: string,
  payloadJson: string | null,
  maxKept: number,
): Promise<SentSignal> {
  const task = `${textLiteral(taskId)}::uuid`;
  const signal = textLiteral(name);
  const payload = payloadJson === null ? 'NULL::jsonb' : `${textLiteral(payloadJson)}::jsonb`;
  const { rows } = await executor.query(
    `/* duraflow_send_signal */ SELECT 1 FROM agent_tasks WHERE id = ${task} FOR NO KEY UPDATE;
     WITH target AS (
       SELECT status, workflow_name, rollback_reason, held_at FROM agent_tasks WHERE id = ${task}
     ), waiting AS (
       SELECT s.id, s.step_key, s.wake_at FROM step_runs s, target
       WHERE s.task_id = ${task} AND s.kind = 'signal' AND s.status = 'waiting' AND s.input->>'name' = ${signal}
         AND target.status = 'pending' AND target.rollback_reason IS NULL AND target.held_at IS NULL
       ORDER BY s.created_at, s.id
       LIMIT 1
     ), deliver AS (
       SELECT w.id, w.step_key FROM waiting w
       WHERE (w.wake_at IS NULL OR w.wake_at > duraflow_clock_timestamp()) AND NOT EXISTS (${oldestKeptSignal(task, signal)})
     ), room AS (
       SELECT EXISTS (SELECT 1 FROM deliver)
              OR (SELECT count(*) FROM task_signals WHERE task_id = ${task} AND consumed_at IS NULL) < ${Number(maxKept)} AS ok
     ), kept AS (
       -- Taken by the waiting wait at once when there is one to deliver to (no older signal of the name is kept).
       INSERT INTO task_signals (task_id, name, payload, consumed_at, consumed_by_step)
       SELECT ${task}, ${signal}, ${payload}, consumed.at, consumed.by
       FROM target LEFT JOIN (SELECT clock_timestamp() AS at, step_key AS by FROM deliver) consumed ON true
       WHERE target.status IN ('pending', 'running') AND (SELECT ok FROM room)
       RETURNING id
     ), delivered AS (
       UPDATE step_runs s
       SET status = 'completed', output = ${payload}, completed_at = clock_timestamp(), completion_seq = ${waitCompletionSeq(task, null)}
       FROM deliver d
       WHERE s.id = d.id AND EXISTS (SELECT 1 FROM kept)
       RETURNING s.id
     ), woken AS (
       UPDATE agent_tasks t SET ${MOVE.wake}
       FROM target
       WHERE t.id = ${task} AND target.status = 'pending' AND target.rollback_reason IS NULL AND EXISTS (SELECT 1 FROM kept)
         AND EXISTS (SELECT 1 FROM step_runs s
                     WHERE s.task_id = ${task} AND s.kind = 'signal' AND s.status = 'waiting' AND s.input->>'name' = ${signal})
       RETURNING pg_notify('${TASK_SUBMITTED_CHANNEL}', t.workflow_name)
     )
     SELECT target.status, (SELECT id FROM kept) AS signal_id, (SELECT count(*) FROM woken) AS woke, NOT (SELECT ok FROM room) AS full
     FROM target`,
  );
  if (!rows.length) return { status: null, signalId: null, full: false, woke: false };
  const row = rows[0];
  return {
    status: row.status,
    signalId: row.signal_id === null ? null : String(row.signal_id),
    full: row.full === true,
    woke: Number(row.woke) > 0,
  };
}
