import { NODE_INCARNATION } from '../../config/node-incarnation';
import { TaskStatus } from '../../domain/task-status';
import { SqlExecutor } from '../duraflow-database';
import { ReapedTask, reapedTask, reapSql } from './reap-stale-tasks';

/**
 * Condition on `t`: running, held by a process of node $1 other than worker $2 (the one that
 * recovers): an incarnation's worker id (`<nodeId>#<8 hex digits>`, config/node-incarnation.ts),
 * or the node id itself (the worker id of a process configured with `workerId: <nodeId>` before
 * the node had a `nodeId`).
 */
const HELD_BY_EARLIER_PROCESS =
  `t.status = '${TaskStatus.RUNNING}' AND t.worker_id <> $2 AND (t.worker_id = $1 OR (` +
  `left(t.worker_id, -${NODE_INCARNATION.hexDigits + 1}) = $1 ` +
  `AND right(t.worker_id, ${NODE_INCARNATION.hexDigits + 1}) ~ '^${NODE_INCARNATION.separator}[0-9a-f]{${NODE_INCARNATION.hexDigits}}$'))`;

/**
 * The recover move: a process that has just taken its node's lock (background/node-identity.ts)
 * takes back the tasks earlier processes of that node left running, at once instead of after
 * `staleAfterMs`. Whatever their heartbeat says, those processes are gone: the lock is held by
 * one live process at a time and a session's lock dies with its session, so a process of this
 * node that could still write holds no lock and its claims are about to be cleared here.
 *
 * Each task moves exactly as the reaper moves a stale one (reap-stale-tasks.ts: a retry counted,
 * back to `pending`, or to its rollback, or ended), so its claim token is cleared and every
 * late write of the old process is fenced out, and a task that kills its process on every run
 * still runs out of retries. `db` is the lock's own session: the statement runs only while the
 * lock is held (a session that died runs nothing). Rows locked by someone else are skipped (left
 * to the reaper).
 */
export async function recoverNodeTasks(db: SqlExecutor, nodeId: string, workerId: string): Promise<ReapedTask[]> {
  const { rows } = await db.query(reapSql('SELECT 1', HELD_BY_EARLIER_PROCESS), [nodeId, workerId]);
  return rows.map(reapedTask);
}
