/**
 * How a signal is delivered to a wait, written once for both paths that deliver one: a run that
 * settles its wait takes the oldest kept signal of the name (settle-wait.ts), and a send to a task
 * suspended at a wait of that name hands the new signal to that wait (send-signal.ts). Either
 * way the signal row is marked consumed by the wait's key, and the wait's step row is completed
 * with the signal's payload as its output at the next place in the task's completion order.
 * Arguments are SQL expressions.
 */

/** The oldest signal of `name` kept for the task (not consumed by any wait): signals of one name are taken in the order they were sent. */
export function oldestKeptSignal(task: string, name: string): string {
  return `SELECT id FROM task_signals WHERE task_id = ${task} AND name = ${name} AND consumed_at IS NULL ORDER BY id LIMIT 1`;
}

/** The SET list of a kept signal that the wait `stepKey` takes (a signal sent to a waiting wait is written so at once: consumed_at, consumed_by_step). */
export function consumedBy(stepKey: string): string {
  return `consumed_at = clock_timestamp(), consumed_by_step = ${stepKey}`;
}

/**
 * The completion_seq of a wait completed now: the next after every completion of the task. A
 * run settling its own wait passes its count (`runSeq`), which is ahead of the database's while
 * its own checkpoints are in flight; a send, with no run owning the task, passes none.
 */
export function waitCompletionSeq(task: string, runSeq: string | null): string {
  const next = `(SELECT COALESCE(max(completion_seq), 0) + 1 FROM step_runs WHERE task_id = ${task})`;
  return runSeq === null ? next : `GREATEST(${runSeq}, ${next})`;
}
