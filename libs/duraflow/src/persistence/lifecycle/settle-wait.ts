import { SqlExecutor } from '../duraflow-database';
import { countLiteral, textLiteral } from '../literals';
import { ownedBy, ownedTaskRow } from './fencing';
import { consumedBy, oldestKeptSignal, waitCompletionSeq } from './signal-delivery';
import { MOVE, TERMINAL } from './task-lifecycle';

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
  /** The run's count of completions: the row gets the next place in the task's completion order at least this (signal-delivery.ts). */
  completionSeq: number;
}

export type WaitSettlement =
  /** `completionSeq`: the place the wait took in the task's completion order. */
  | { outcome: 'completed'; output: unknown; outputUndefined: boolean; completionSeq: number }
  | { outcome: 'failed'; error: Record<string, unknown>; completionSeq: number }
  /** `wakeInMs`: how long until the wake-up by the database's clock (the one the claim compares with). */
  | { outcome: 'waiting'; wakeAt: Date; wakeInMs: number }
  | { outcome: 'lost' };

function timeLiteral(value: Date | null): string {
  return value ? `${textLiteral(value.toISOString())}::timestamptz` : 'NULL::timestamptz';
}

/** What tells whether the wait is over (an SQL fragment of CTEs), its status, output and error, by kind. */
function evidence(wait: WaitToSettle, task: string, due: string): { ctes: string; status: string; output: string; error: string } {
  switch (wait.kind) {
    case 'signal':
      return {
        // The oldest kept signal of the name, taken once.
        ctes: `taken AS (
           UPDATE task_signals SET ${consumedBy(textLiteral(wait.stepKey))}
           WHERE id = (${oldestKeptSignal(task, textLiteral(wait.signalName!))}) AND EXISTS (SELECT 1 FROM owner)
           RETURNING payload
         ),`,
        status: `CASE WHEN EXISTS (SELECT 1 FROM taken) THEN 'completed' WHEN ${due} THEN 'failed' ELSE 'waiting' END`,
        output: `(SELECT payload FROM taken)`,
        error: `jsonb_build_object('code', 'SIGNAL_TIMEOUT', 'signalName', ${textLiteral(wait.signalName!)}, 'deadline', ${
          wait.wakeAt ? textLiteral(wait.wakeAt.toISOString()) : 'NULL'
        })`,
      };
    case 'child': {
      const child = textLiteral(wait.childTaskId!);
      return {
        ctes: `child AS (SELECT status, output, error FROM agent_tasks WHERE id = ${child}::uuid AND status IN ${TERMINAL}),`,
        status: `CASE WHEN NOT EXISTS (SELECT 1 FROM child) THEN 'waiting' WHEN (SELECT status FROM child) = 'completed' THEN 'completed' ELSE 'failed' END`,
        output: `(SELECT output FROM child)`,
        error: `(SELECT jsonb_build_object('code', 'CHILD_WORKFLOW_FAILED', 'childTaskId', ${child}, 'status', status, 'childError', error) FROM child)`,
      };
    }
    case 'sleep':
      return { ctes: '', status: `CASE WHEN ${due} THEN 'completed' ELSE 'waiting' END`, output: 'NULL::jsonb', error: 'NULL::jsonb' };
  }
}

/**
 * One round trip and one transaction (two statements sent together over the simple query
 * protocol, which runs them as one implicit transaction), under the run's claim. The first
 * statement locks the task row (FOR NO KEY UPDATE, as a signal's send and a child's end lock it)
 * and makes the commit skip its WAL flush; the second, with a snapshot of its own taken after
 * that lock, judges the wait on what is committed then: a due sleep, the oldest undelivered
 * signal of the name (taken, once), a passed deadline, a child that ended. Over: the wait's row
 * is written completed (or failed) and the run goes on. Not over: the row is written `waiting`
 * and the task goes back to `pending` with `scheduled_at` at its wake-up time, its claim cleared
 * (no slot, worker or heartbeat). Since a send and a child's end lock the same row before they
 * wake a waiting task, a wake-up is never missed.
 *
 * Without the WAL flush, as the claim commits: a settle lost in a server crash leaves the task
 * running under its claim (the reaper recovers it) and the wait unsettled, and the replay
 * settles it the same way (the same oldest signal is still undelivered); each later checkpoint
 * of the run flushes the WAL up to itself, this included. Values go in as literals (the simple
 * query protocol carries no parameters).
 */
export async function settleWait(executor: SqlExecutor, wait: WaitToSettle): Promise<WaitSettlement> {
  const task = `${textLiteral(wait.taskId)}::uuid`;
  const token = `${textLiteral(wait.claimToken)}::uuid`;
  const wakeAt = timeLiteral(wait.wakeAt);
  const due = wait.wakeAt ? `${wakeAt} <= duraflow_clock_timestamp()` : 'false';
  const { ctes, status, output, error } = evidence(wait, task, due);
  const { rows } = await executor.query(
    `/* duraflow_settle_wait */ SELECT set_config('synchronous_commit', 'off', true) FROM agent_tasks WHERE ${ownedBy(task, token)} FOR NO KEY UPDATE;
     WITH owner AS (SELECT 1 FROM agent_tasks WHERE ${ownedBy(task, token)}),
     ${ctes}
     decided AS (
       SELECT s.status, CASE WHEN s.status = 'completed' THEN ${output} END AS output,
              CASE WHEN s.status = 'failed' THEN ${error} END AS error
       FROM (SELECT ${status} AS status) s
       WHERE EXISTS (SELECT 1 FROM owner)
     ), step AS (
       INSERT INTO step_runs (task_id, step_key, kind, status, input, output, error, wake_at, completion_seq, attempt, started_at, completed_at)
       SELECT ${task}, ${textLiteral(wait.stepKey)}, ${textLiteral(wait.kind)}, d.status,
              ${wait.inputJson === null ? 'NULL' : `${textLiteral(wait.inputJson)}::jsonb`}, d.output, d.error, ${wakeAt},
              CASE WHEN d.status <> 'waiting' THEN ${waitCompletionSeq(task, countLiteral(wait.completionSeq))} END, 1, clock_timestamp(),
              CASE WHEN d.status = 'waiting' THEN NULL ELSE clock_timestamp() END
       FROM decided d
       ON CONFLICT (task_id, step_key) DO UPDATE
       SET status = EXCLUDED.status, output = EXCLUDED.output, error = EXCLUDED.error,
           completion_seq = EXCLUDED.completion_seq, completed_at = EXCLUDED.completed_at
       WHERE step_runs.status = 'waiting'
       RETURNING completion_seq
     ), suspended AS (
       UPDATE agent_tasks SET ${MOVE.suspend(wait.wakeAt ? wakeAt : timeLiteral(NO_WAKE_UP))}
       WHERE ${ownedBy(task, token)} AND (SELECT status FROM decided) = 'waiting'
       RETURNING scheduled_at
     )
     SELECT d.status, d.output, d.output IS NULL AS output_undefined, d.error,
            (SELECT scheduled_at FROM suspended) AS wake_at,
            (SELECT EXTRACT(EPOCH FROM scheduled_at - duraflow_clock_timestamp()) * 1000 FROM suspended) AS wake_in_ms,
            (SELECT completion_seq FROM step) AS completion_seq
     FROM decided d`,
  );
  if (!rows.length) return { outcome: 'lost' };
  const row = rows[0];
  if (row.status === 'completed') {
    return { outcome: 'completed', output: row.output, outputUndefined: row.output_undefined, completionSeq: Number(row.completion_seq) };
  }
  if (row.status === 'failed') return { outcome: 'failed', error: row.error, completionSeq: Number(row.completion_seq) };
  const until: Date = row.wake_at ?? wait.wakeAt ?? NO_WAKE_UP;
  const wakeInMs = row.wake_in_ms === null ? until.getTime() - Date.now() : Number(row.wake_in_ms);
  return { outcome: 'waiting', wakeAt: until, wakeInMs };
}

/**
 * A sleep whose end has passed, reached again by the run it suspended: its `waiting` row is
 * completed in one statement, fenced on the claim (no signal or child to look at, so nothing to
 * lock first). Null when the claim no longer owns the task or the row is not waiting; else the
 * sleep's place in the task's completion order.
 *
 * Committed without waiting for its WAL flush, as the claim and a wait's settle are: losing it in
 * a crash leaves the row `waiting` with its wake-up passed, so the replay completes the same sleep
 * again (its end was fixed when it was first reached); every later synchronous commit of the run
 * (a checkpoint, the completion) flushes the WAL past it. One round trip, simple protocol.
 */
export async function completeDueSleep(db: SqlExecutor, taskId: string, claimToken: string, stepKey: string, runSeq: number) {
  const task = `${textLiteral(taskId)}::uuid`;
  const { rows } = await db.query<{ completion_seq: number }>(
    `/* duraflow_complete_sleep */ SELECT set_config('synchronous_commit', 'off', true);
     UPDATE step_runs SET status = 'completed', completed_at = clock_timestamp(), completion_seq = ${waitCompletionSeq(task, countLiteral(runSeq))}
     WHERE task_id = ${task} AND step_key = ${textLiteral(stepKey)} AND kind = 'sleep' AND status = 'waiting'
       AND wake_at <= duraflow_clock_timestamp()
       AND EXISTS (${ownedTaskRow(task, `${textLiteral(claimToken)}::uuid`)})
     RETURNING completion_seq`,
  );
  return rows.length ? Number(rows[0].completion_seq) : null;
}
