import { TASK_SUBMITTED_CHANNEL } from '../../domain/duraflow.constants';
import { SqlExecutor } from '../duraflow-database';
import { ownedBy, ownedTaskRows } from './fencing';
import { MOVE } from './task-lifecycle';

/**
 * Whether this claim still owns its running task. Asked when a fenced write changed nothing: a
 * write retried after its first try committed (the reply was lost) also changes nothing, yet
 * the claim still owns the task.
 */
export async function ownsTask(db: SqlExecutor, id: string, claimToken: string): Promise<boolean> {
  const { rowCount } = await db.query(`SELECT 1 FROM agent_tasks WHERE ${ownedBy('$1', '$2')}`, [id, claimToken], 'duraflow_owns_task');
  return rowCount > 0;
}

/** The renew move, one statement per process per tick; returns the claim tokens that still own their task. */
export async function renewClaims(db: SqlExecutor, ids: string[], claimTokens: string[]): Promise<Set<string>> {
  const { rows } = await db.query<{ claim_token: string }>(
    `WITH c AS (SELECT * FROM unnest($1::uuid[], $2::uuid[]) AS c(task_id, claim_token)),
     owned AS (${ownedTaskRows('c', 'NO KEY UPDATE')})
     UPDATE agent_tasks t SET ${MOVE.renew} FROM owned WHERE t.id = owned.id
     RETURNING t.claim_token`,
    [ids, claimTokens],
    'duraflow_heartbeat',
  );
  return new Set(rows.map((row) => row.claim_token));
}

/** The release move: claimed tasks back to `pending` without counting a retry (graceful shutdown). Returns their ids. */
export async function releaseClaims(db: SqlExecutor, ids: string[], claimTokens: string[]): Promise<string[]> {
  const { rows } = await db.query<{ id: string; workflow_name: string }>(
    `WITH c AS (SELECT * FROM unnest($1::uuid[], $2::uuid[]) AS c(task_id, claim_token)),
     owned AS (${ownedTaskRows('c', 'NO KEY UPDATE')}),
     released AS (
       UPDATE agent_tasks t SET ${MOVE.release} FROM owned WHERE t.id = owned.id
       RETURNING t.id, t.workflow_name
     )
     SELECT id, pg_notify('${TASK_SUBMITTED_CHANNEL}', workflow_name) FROM released`,
    [ids, claimTokens],
  );
  return rows.map((row) => row.id);
}
