import { TaskStatus } from '../../domain/task-status';
import { SqlExecutor } from '../duraflow-database';
import { ReapedTask, reapedTask, reapSql } from './reap-stale-tasks';

/** Condition on `t`: running under the claim $1 (task) / $2 (claim token). */
const UNDER_CLAIM = `t.status = '${TaskStatus.RUNNING}' AND t.id = $1::uuid AND t.claim_token = $2::uuid`;

/**
 * The testing kit's recovery of a run it crashed (`env.crashAfterStep`): that one claim moves
 * exactly as the reaper moves a stale task (reap-stale-tasks.ts: a retry counted, back to
 * `pending`, or to its rollback, or ended), at once instead of after `staleAfterMs` of real time.
 * Its claim token is cleared, so any late write of the abandoned run is fenced out. Nothing
 * when the claim no longer owns the task.
 */
export async function recoverCrashedClaim(db: SqlExecutor, taskId: string, claimToken: string): Promise<ReapedTask | undefined> {
  const { rows } = await db.query(reapSql('SELECT 1', UNDER_CLAIM), [taskId, claimToken]);
  return rows.map(reapedTask)[0];
}
