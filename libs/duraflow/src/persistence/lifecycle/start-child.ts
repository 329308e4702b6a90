import { ChildKeyTakenError } from '../../domain/errors';
import { SqlExecutor } from '../duraflow-database';
import { createTask, NewTask } from './create-tasks';
import { ownedBy } from './fencing';
import { NO_WAKE_UP } from './settle-wait';
import { waitCompletionSeq } from './signal-delivery';
import { MOVE } from './task-lifecycle';

/** The compensation name a child's step row carries: rolling the parent back rolls the child back (execution/undo-step.ts). */
export const CHILD_COMPENSATION = 'duraflow:child';

/** A child to start from a parent's step, as the task factory prepared it, with the parent's claim. */
export interface ChildToStart {
  /** The child task: its `parentTaskId`, `parentStepKey` and `idempotencyKey` (derived from both) set. */
  child: NewTask & { parentTaskId: string; parentStepKey: string };
  claimToken: string;
  /** runChild: the row stays `waiting` until the child ends. startChild: it is completed at once with `{ id }`. */
  wait: boolean;
  /** The parent run's count of completions (signal-delivery.ts). */
  completionSeq: number;
}

/**
 * Starts a child task and records it as the parent's step in one transaction under the parent's
 * claim (for runChild, the parent is suspended in it too): a crash between the two writes leaves
 * neither, and the child's idempotency key makes a retry of a commit whose reply was lost find the
 * child it made. Null when the claim no longer owns the parent.
 *
 * @throws ChildKeyTakenError when a task that is not this step's child holds the key (nothing written)
 */
export async function startChild(tx: SqlExecutor, start: ChildToStart): Promise<{ childTaskId: string } | null> {
  const { child, claimToken } = start;
  const owned = await tx.query(`SELECT 1 FROM agent_tasks WHERE ${ownedBy('$1', '$2')} FOR NO KEY UPDATE`, [
    child.parentTaskId,
    claimToken,
  ]);
  if (!owned.rowCount) return null;
  const { task: found, created } = await createTask(tx, child);
  // A task that held the key already is this step's child only when it names this parent and
  // step (a retry of a start whose commit's reply was lost); any other is never taken for it.
  if (!created && (found.parentTaskId !== child.parentTaskId || found.parentStepKey !== child.parentStepKey)) {
    throw new ChildKeyTakenError(child.parentTaskId, child.parentStepKey, child.workflowName, found.id);
  }
  const childTaskId = found.id;
  await tx.query(
    `INSERT INTO step_runs (task_id, step_key, kind, status, input, output, compensation_fn, completion_seq, attempt, started_at, completed_at)
     VALUES ($1, $2, 'child', $3::varchar, $4::jsonb, $5::jsonb, $6,
             CASE WHEN $3::varchar = 'completed' THEN ${waitCompletionSeq('$1::uuid', '$7::int')} END, 1, clock_timestamp(),
             CASE WHEN $3::varchar = 'completed' THEN clock_timestamp() END)
     ON CONFLICT (task_id, step_key) DO NOTHING`,
    [
      child.parentTaskId,
      child.parentStepKey,
      start.wait ? 'waiting' : 'completed',
      JSON.stringify({ workflowName: child.workflowName, childTaskId }),
      start.wait ? null : JSON.stringify({ id: childTaskId }),
      CHILD_COMPENSATION,
      start.completionSeq,
    ],
  );
  if (start.wait) {
    // runChild: the child is not visible before this commits, so it cannot have ended: the
    // parent waits from here (its wake-up is the trigger that the child's end fires).
    await tx.query(`UPDATE agent_tasks SET ${MOVE.suspend(`'${NO_WAKE_UP.toISOString()}'::timestamptz`)} WHERE ${ownedBy('$1', '$2')}`, [
      child.parentTaskId,
      claimToken,
    ]);
  }
  return { childTaskId };
}
