import { TASK_FINISHED_CHANNEL } from '../../domain/duraflow.constants';
import { RollbackReason } from '../../domain/entities/agent-task.entity';
import { TaskStatus } from '../../domain/task-status';
import { DuraflowDatabase, SqlExecutor } from '../duraflow-database';
import { ownedBy, ownedTaskRows } from './fencing';
import { rollbackFinalStatus, taskDeadLettered } from './rollback-rules';
import { MOVE } from './task-lifecycle';

/** A write guarded by the claim: lands only while this claim still owns a running task. */
const OWNED = ownedBy('$1', '$2');

/**
 * The complete move for many runs in one statement, each fenced on its own claim. One NOTIFY
 * names them all (ids comma-separated; callers keep batches under 200 ids, within NOTIFY's
 * 8000-byte payload). Returns the ids that completed.
 */
export async function completeTasks(
  db: SqlExecutor,
  ids: string[],
  claimTokens: string[],
  outputs: Array<string | null>,
): Promise<Set<string>> {
  const { rows } = await db.query<{ id: string }>(
    `WITH c AS (
       SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::jsonb[]) AS c(task_id, claim_token, output)
     ), owned AS (${ownedTaskRows('c', 'NO KEY UPDATE', ['output'])}), done AS (
       UPDATE agent_tasks t SET ${MOVE.finish(`'${TaskStatus.COMPLETED}'`)}, output = owned.output
       FROM owned WHERE t.id = owned.id
       RETURNING t.id
     ), notified AS (
       SELECT pg_notify('${TASK_FINISHED_CHANNEL}', string_agg(id::text, ',')) FROM done HAVING count(*) > 0
     )
     SELECT id FROM done, (SELECT count(*) FROM notified) AS sent`,
    [ids, claimTokens, outputs],
    'duraflow_complete_tasks',
  );
  return new Set(rows.map((row) => row.id));
}

/** Fenced: the fail move of a run with nothing to undo (its error kept). False when the claim no longer owns the task. */
export async function failTask(db: SqlExecutor, id: string, claimToken: string, errorJson: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `WITH done AS (
       UPDATE agent_tasks SET ${MOVE.finish(`'${TaskStatus.FAILED}'`)}, error = $3::jsonb WHERE ${OWNED} RETURNING id
     )
     SELECT pg_notify('${TASK_FINISHED_CHANNEL}', id::text) FROM done`,
    [id, claimToken, errorJson],
    'duraflow_fail_task',
  );
  return rowCount > 0;
}

/**
 * Fenced: the run failed for good (or was cancelled) and its completed steps are about to be
 * undone. The task stays `running` (heartbeated, recoverable by the reaper) with
 * `rollback_reason` set, so whoever claims it next resumes the rollback instead of running the
 * workflow again.
 */
export async function beginRollback(
  db: SqlExecutor,
  id: string,
  claimToken: string,
  reason: RollbackReason,
  errorJson: string | null,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE agent_tasks SET ${MOVE.beginRollback('$3')}, error = COALESCE($4::jsonb, error) WHERE ${OWNED}`,
    [id, claimToken, reason, errorJson],
    'duraflow_begin_rollback',
  );
  return rowCount > 0;
}

/**
 * Fenced: the rollback is over, and the task takes the status the rollback rules give it
 * (`hadStepsToUndo`: the rollback found steps to undo). The error stays. Null when the claim no
 * longer owns the task. The task row is locked first and the dead-letter queue read in a later
 * statement, so a dead-letter retry that resolved an entry meanwhile (it locks the same row) is seen.
 */
export function finishRollback(
  db: DuraflowDatabase,
  id: string,
  claimToken: string,
  reason: RollbackReason,
  hadStepsToUndo: boolean,
): Promise<TaskStatus | null> {
  return db.transaction(async (tx) => {
    const owned = await tx.query(`SELECT 1 FROM agent_tasks WHERE ${OWNED} FOR UPDATE`, [id, claimToken]);
    if (!owned.rowCount) return null;
    const { rows } = await tx.query<{ status: TaskStatus }>(
      `WITH done AS (
         UPDATE agent_tasks SET ${MOVE.finish(rollbackFinalStatus('$2', taskDeadLettered('$1'), '$3'))}
         WHERE id = $1 RETURNING id, status
       )
       SELECT status, pg_notify('${TASK_FINISHED_CHANNEL}', id::text) FROM done`,
      [id, reason, hadStepsToUndo],
      'duraflow_finish_rollback',
    );
    return rows[0]?.status ?? null;
  });
}
