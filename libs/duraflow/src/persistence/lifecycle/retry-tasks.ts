import { TASK_SUBMITTED_CHANNEL } from '../../domain/duraflow.constants';
import { SqlExecutor } from '../duraflow-database';
import { taskDeadLettered } from './rollback-rules';
import { MOVE } from './task-lifecycle';

/**
 * Condition on a task row `t`: `workflows.retry` can run it again from where it stopped. A
 * `failed` task, or a `cancelled` one that was not rolled back, whose steps were never
 * compensated (none compensated, none in the dead-letter queue): undone work is not run on as
 * if it stood. A held task is `pending` (its move is resume); rolled_back and partial_rollback
 * tasks undid their steps. A task a retry already moved is `pending`, so a second retry (or one
 * racing the reaper or a cancel, re-checked on the locked row) finds nothing to change.
 */
export function retryable(t: string): string {
  return `(${t}.status = 'failed' OR (${t}.status = 'cancelled' AND ${t}.rollback_reason IS NULL))
          AND ${t}.deleted_at IS NULL
          AND NOT EXISTS (SELECT 1 FROM step_runs s WHERE s.task_id = ${t}.id AND s.compensated_at IS NOT NULL)
          AND NOT ${taskDeadLettered(`${t}.id`)}`;
}

/**
 * The retry move of the tasks among `ids` that are retryable, in one conditional statement:
 * back to pending and runnable now, its retry counter reset, its error (and a rollback reason a
 * failed task kept) cleared and kept in its history as `{ kind: 'retried', at, fromStatus, error }`.
 * Its step rows stay: the completed ones answer the next run, and a failed step starts over with
 * its full retries (its attempt numbers go on from the recorded ones). One NOTIFY per workflow
 * wakes the workers on commit. Resolves with the ids it changed.
 */
export async function retryTasks(executor: SqlExecutor, ids: string[]): Promise<string[]> {
  if (!ids.length) return [];
  const { rows } = await executor.query<{ id: string }>(
    `WITH retried AS (
       UPDATE agent_tasks t SET ${MOVE.retry('t')}
       WHERE t.id = ANY($1::uuid[]) AND ${retryable('t')}
       RETURNING t.id, t.workflow_name
     ), notified AS (
       SELECT pg_notify('${TASK_SUBMITTED_CHANNEL}', workflow_name) FROM (SELECT DISTINCT workflow_name FROM retried) w
     )
     SELECT retried.id FROM retried, (SELECT count(*) FROM notified) AS sent`,
    [ids],
    'duraflow_retry_tasks',
  );
  return rows.map((row) => row.id);
}
