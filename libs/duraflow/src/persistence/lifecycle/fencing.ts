/**
 * The SQL that fences a run's writes on its claim, in one place for every store and every move
 * of the lifecycle, with the order in which several claimed task rows are locked.
 */

/** WHERE condition on agent_tasks: the claim `$token` still owns the running task `$id`. */
export function ownedBy(id: string, token: string): string {
  return `id = ${id} AND claim_token = ${token} AND status = 'running'`;
}

/**
 * Subquery that yields one row while the claim owns the task, reading the row FOR SHARE: a
 * concurrent reap, cancel or hand-back waits for the write, or the write sees it and lands nowhere.
 */
export function ownedTaskRow(id: string, token: string): string {
  return `SELECT 1 FROM agent_tasks WHERE ${ownedBy(id, token)} FOR SHARE`;
}

/**
 * The running condition as the fenced writes of many claims test it: `status` read through an
 * expression no index covers, so PostgreSQL finds their rows through the primary key from the
 * claims whatever its statistics say. Tested plainly, a table analyzed while nothing ran (the
 * planner then expects one running task) led it to walk every running task's row for each claim
 * of a batch: 39 ms instead of 7 for a completion of 200 tasks with 40,000 being drained.
 */
const STILL_RUNNING = `t.status || '' = 'running'`;

/**
 * The same for many claims at once: the rows of the tasks that the claims in `claims` (a
 * relation with columns task_id, claim_token) still own, locked in id order (FOR SHARE to
 * write beside them, FOR NO KEY UPDATE to update them). Every statement that locks the rows of
 * several claims goes through here, so no two of them wait for each other in a cycle (the other
 * locks of several rows: a cancel's tree, deepest first; the reaper and retention, SKIP LOCKED;
 * task-lifecycle.ts).
 *
 * `carry` names columns of `claims` to return beside each row (its claim's own values, such as
 * a completion's output), for claims that name each task once; a relation that may name a task
 * several times (the checkpoints of a run's parallel steps) carries nothing and yields each
 * task once.
 */
export function ownedTaskRows(claims: string, lock: 'SHARE' | 'NO KEY UPDATE', carry: string[] = []): string {
  if (carry.length === 0)
    return `SELECT t.id, t.claim_token FROM agent_tasks t
          WHERE (t.id, t.claim_token) IN (SELECT task_id, claim_token FROM ${claims}) AND ${STILL_RUNNING}
          ORDER BY t.id FOR ${lock}`;
  return `SELECT t.id, t.claim_token, ${carry.map((column) => `k.${column}`).join(', ')}
          FROM ${claims} k JOIN agent_tasks t ON t.id = k.task_id AND t.claim_token = k.claim_token
          WHERE ${STILL_RUNNING}
          ORDER BY t.id FOR ${lock} OF t`;
}
