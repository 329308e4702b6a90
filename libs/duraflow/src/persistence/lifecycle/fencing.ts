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
 * The same for many claims at once: the rows of the tasks that the claims in `claims` (a
 * relation with columns task_id, claim_token) still own, locked in id order (FOR SHARE to
 * write beside them, FOR NO KEY UPDATE to update them). Every statement that locks the rows of
 * several claims goes through here, so no two of them wait for each other in a cycle (the other
 * locks of several rows: a cancel's tree, deepest first; the reaper and retention, SKIP LOCKED;
 * task-lifecycle.ts).
 */
export function ownedTaskRows(claims: string, lock: 'SHARE' | 'NO KEY UPDATE'): string {
  return `SELECT id, claim_token FROM agent_tasks
          WHERE (id, claim_token) IN (SELECT task_id, claim_token FROM ${claims}) AND status = 'running'
          ORDER BY id FOR ${lock}`;
}
