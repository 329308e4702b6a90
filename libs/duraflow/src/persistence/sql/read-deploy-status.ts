import type { SqlExecutor } from '../duraflow-database';
import { held } from '../lifecycle/task-lifecycle';
import { PATCH_MARKER_PREFIX } from '../../domain/reserved-keys';

/** Unfinished tasks of one workflow version: what must drain before that version's code can go. */
export interface UnfinishedVersionCounts {
  workflowName: string;
  /** `workflow_version`, NULL read as 1. */
  version: number;
  pending: number;
  running: number;
  /** Held by the determinism guard (pending, not claimed until resumed). */
  held: number;
}

/** Unfinished tasks that recorded `ctx.patched(id)` as false: while any is left, the patch's old branch must stay. */
export interface PatchStillNeeded {
  workflowName: string;
  patchId: string;
  unfinishedTasks: number;
}

export interface DeployStatus {
  unfinishedByVersion: UnfinishedVersionCounts[];
  patchesRecordedFalse: PatchStillNeeded[];
}

/**
 * What a team asks before it removes an old workflow version or an old patch branch: the
 * unfinished tasks per workflow version, and the patches unfinished tasks recorded as false.
 * Read-only, for a command run by hand (it reads every unfinished task).
 */
export async function readDeployStatus(executor: SqlExecutor): Promise<DeployStatus> {
  const versions = await executor.query<{ workflow_name: string; version: number; pending: number; running: number; held: number }>(
    `SELECT workflow_name, coalesce(workflow_version, 1) AS version,
            count(*) FILTER (WHERE status = 'pending' AND NOT ${held('agent_tasks')})::int AS pending,
            count(*) FILTER (WHERE status = 'running')::int AS running,
            count(*) FILTER (WHERE ${held('agent_tasks')})::int AS held
     FROM agent_tasks WHERE deleted_at IS NULL AND status IN ('pending', 'running')
     GROUP BY 1, 2 ORDER BY 1, 2`,
  );
  const patches = await executor.query<{ workflow_name: string; patch_id: string; tasks: number }>(
    `SELECT t.workflow_name, substr(s.step_key, ${PATCH_MARKER_PREFIX.length + 1}) AS patch_id, count(*)::int AS tasks
     FROM step_runs s JOIN agent_tasks t ON t.id = s.task_id
     WHERE s.step_key LIKE '${PATCH_MARKER_PREFIX}%' AND s.status = 'completed' AND s.output = 'false'::jsonb
       AND t.status IN ('pending', 'running') AND t.deleted_at IS NULL
     GROUP BY 1, 2 ORDER BY 1, 2`,
  );
  return {
    unfinishedByVersion: versions.rows.map((row) => ({
      workflowName: row.workflow_name,
      version: row.version,
      pending: row.pending,
      running: row.running,
      held: row.held,
    })),
    patchesRecordedFalse: patches.rows.map((row) => ({
      workflowName: row.workflow_name,
      patchId: row.patch_id,
      unfinishedTasks: row.tasks,
    })),
  };
}
