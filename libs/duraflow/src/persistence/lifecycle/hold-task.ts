import { TASK_SUBMITTED_CHANNEL } from '../../domain/duraflow.constants';
import { AgentTask } from '../../domain/entities/agent-task.entity';
import { SqlExecutor } from '../duraflow-database';
import { ownedBy } from './fencing';
import { held, MOVE } from './task-lifecycle';
import { TASK_COLUMNS, toAgentTask } from '../row-mappers';

/**
 * The determinism guard's hold and its release. A held task is `pending` with `held_at` set
 * and its NonDeterminismError in `error`: nothing runs it (the claim passes it over), nothing
 * rolls it back (a deploy bug is not a business failure), and the reaper never sees it (it
 * only reaps `running` tasks). Cancel works on it as on any pending task.
 */

/** Fenced on the run's claim: the task goes back to pending, held. False when the claim no longer owns it. */
export async function holdTask(db: SqlExecutor, id: string, claimToken: string, errorJson: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE agent_tasks SET ${MOVE.hold('$3::jsonb')} WHERE ${ownedBy('$1', '$2')}`,
    [id, claimToken, errorJson],
    'duraflow_hold_task',
  );
  return rowCount > 0;
}

/**
 * Clears the hold of a held task (its error with it) and wakes the workers: it runs again on
 * the code deployed now. Null when the task is not held (unknown, finished, or never held).
 */
export async function resumeHeldTask(db: SqlExecutor, id: string): Promise<AgentTask | null> {
  const { rows } = await db.query(
    `WITH resumed AS (
       UPDATE agent_tasks t SET ${MOVE.resume} WHERE t.id = $1 AND ${held('t')}
       RETURNING ${TASK_COLUMNS}
     )
     SELECT resumed.*, pg_notify('${TASK_SUBMITTED_CHANNEL}', workflow_name) AS notified FROM resumed`,
    [id],
    'duraflow_resume_task',
  );
  return rows.length ? toAgentTask(rows[0]) : null;
}

/** resumeMany's move of a batch whose rows the caller's transaction locked (bulk-batches.ts): the ids resumed; one NOTIFY per workflow. */
export async function resumeHeldTasks(tx: SqlExecutor, ids: string[]): Promise<string[]> {
  const { rows } = await tx.query<{ ids: string[] | null }>(
    `WITH resumed AS (
       UPDATE agent_tasks t SET ${MOVE.resume} WHERE t.id = ANY($1::uuid[]) AND ${held('t')}
       RETURNING t.id, t.workflow_name
     )
     SELECT (SELECT array_agg(id) FROM resumed) AS ids,
            (SELECT count(pg_notify('${TASK_SUBMITTED_CHANNEL}', workflow_name)) FROM (SELECT DISTINCT workflow_name FROM resumed) w) AS woke`,
    [ids],
  );
  return rows[0].ids ?? [];
}
