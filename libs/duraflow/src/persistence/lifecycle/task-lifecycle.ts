import { TERMINAL_STATUSES } from '../../domain/task-status';
import { countLiteral, varcharArrayLiteral } from '../literals';

/**
 * The task lifecycle: every status a task can be in, every move between them, and the columns
 * each move sets and clears. Every statement that changes a task's status (or its claim) lives
 * in this folder and builds its SET list from the moves below; the linter refuses such a
 * statement anywhere else (eslint/architecture.mjs, `task-lifecycle`).
 *
 * States (`agent_tasks.status`, and what qualifies it):
 *   pending    runnable once `runnableSince <= duraflow_now()` (RUNNABLE_SINCE); before that waiting (a
 *              delayed submit, a sleep, a signal or child wait: scheduled_at at its wake-up);
 *              held while `held_at` is set (the determinism guard stopped it: never claimed);
 *              with `rollback_reason` set, its next claim undoes its steps instead of running.
 *   running    claimed by one worker: worker_id, claim_token (the fence every write of the run
 *              carries) and heartbeat_at set; with `rollback_reason`, rolling back.
 *   completed | failed | cancelled | rolled_back | partial_rollback   terminal (TERMINAL):
 *              never left, but for partial_rollback -> rolled_back once its last dead letter
 *              is resolved.
 *
 * Moves (file: what runs it):
 *   create          -> pending                        create-tasks.ts: submit, submitMany, a child, a schedule's tick; fork-task.ts: a fork
 *                                                     (a published event's tasks too; from SQL, duraflow_submit of migration 4000 writes the same row)
 *   claim           pending (runnable, claimable) -> running        claim-tasks.ts, claim-limited-tasks.ts
 *   renew           running -> running (heartbeat_at)              renew-claims.ts
 *   release         running -> pending (no retry counted)          renew-claims.ts: shutdown, a task claimed ahead too long
 *   suspend         running -> pending until its wake-up           settle-wait.ts, start-child.ts (runChild)
 *   wake            pending (waiting) -> pending, runnable now     send-signal.ts (a child's end: the trigger of migration 200)
 *                                                                  complete-callback.ts (a callback's signal, through send-signal.ts)
 *   hold            running -> pending, held                       hold-task.ts
 *   resume          pending, held -> pending                       hold-task.ts: resume, resumeMany (in batches: bulk-batches.ts)
 *   complete        running -> completed                           finish-tasks.ts
 *   fail            running -> failed                              finish-tasks.ts
 *   begin rollback  running -> running, rollback_reason set        finish-tasks.ts
 *   end rollback    running (rolling back) -> rolled_back | partial_rollback | failed | cancelled   finish-tasks.ts
 *   cancel          pending | running -> cancelled                 cancel-tasks.ts: cancel, cancelMany (in batches: bulk-batches.ts)
 *   hand over       pending | running -> pending, rollback_reason 'cancelled'   cancel-tasks.ts (a child cancelled with compensation)
 *   take over       pending | running -> running under a new claim, rollback_reason 'cancelled'   cancel-tasks.ts
 *   reap            running, stale -> pending (a retry counted) | pending to roll back | ended      reap-stale-tasks.ts
 *   recover         running, held by an earlier process of this node -> as reap   recover-node-tasks.ts: a node's boot (worker.nodeId)
 *   resolve         partial_rollback -> rolled_back                resolve-dead-letter.ts
 *   retry           failed | cancelled (not compensated) -> pending, runnable now   retry-tasks.ts: workflows.retry, retryMany
 *   delete          terminal -> gone (retention)                   delete-expired-tasks.ts
 * Any move into a terminal status publishes `duraflow.task.<status>` while a workflow subscribes to it
 * (the trigger of migration 4000, in the move's own transaction; it changes no task row itself).
 *
 * Row locks: a statement that locks several task rows locks them in id order (fencing.ts,
 * `ownedTaskRows`), but for the tree of a cancel, locked deepest first: a child that ends locks
 * its parent (the wake-up trigger), so children before parents never waits in a cycle with it.
 * A statement that reads other tables to decide a task's move locks the task row first, in a
 * statement of its own, and reads in a later one (a snapshot taken after the lock).
 */

/** The terminal statuses as an SQL list, `('completed', ...)`. */
export const TERMINAL = `(${TERMINAL_STATUSES.map((status) => `'${status}'`).join(', ')})`;

/**
 * When a pending task became (or becomes) runnable: its `scheduled_at` (a delayed submit, a
 * sleep's end, a wake-up) or else its creation. idx_agent_tasks_claim and
 * idx_agent_tasks_flow_pending hold it as a key, so tasks waiting for a later time sort after
 * every runnable one.
 */
export function runnableSince(t: string): string {
  return `COALESCE(${t}.scheduled_at, ${t}.created_at, '-infinity'::timestamptz)`;
}

/** The order both claims serve runnable tasks in: priority, then the time each became runnable. */
export function runnableOrder(t: string): string {
  return `${t}.priority DESC, ${runnableSince(t)}, ${t}.id`;
}

/** Condition: the task is pending and runnable now (held or not: see claimableCondition). */
export function runnable(t: string): string {
  return `${t}.status = 'pending' AND ${t}.deleted_at IS NULL AND ${runnableSince(t)} <= duraflow_now()`;
}

/** Condition: the determinism guard holds the task (a cancelled task keeps `held_at`, but is no longer held). */
export function held(t: string): string {
  return `(${t}.status = 'pending' AND ${t}.held_at IS NOT NULL)`;
}

/** A workflow a worker claims: its name and the versions it registers (a name alone: version 1). */
export type ClaimableWorkflows = ReadonlyArray<string | { name: string; versions: readonly number[] }>;

/**
 * The claims' filter on the tasks they walk past: of a (workflow_name, version) pair the worker
 * registers, and not held. An extra condition on the ordered walk of the claim's index,
 * evaluated on each row the walk reads, never a join or a sort, so the plan stays the walk
 * whatever the versions.
 */
export function claimableCondition(workflows: ClaimableWorkflows, t: string): string {
  const byVersions = new Map<string, { names: string[]; versions: number[] }>();
  for (const workflow of workflows) {
    const { name, versions } = typeof workflow === 'string' ? { name: workflow, versions: [1] } : workflow;
    const sorted = [...new Set(versions)].sort((a, b) => a - b);
    const group = byVersions.get(sorted.join(',')) ?? { names: [], versions: sorted };
    group.names.push(name);
    byVersions.set(sorted.join(','), group);
  }
  const groups = [...byVersions.values()];
  const names = `${t}.workflow_name = ANY(${varcharArrayLiteral(groups.flatMap((group) => group.names))})`;
  if (groups.length <= 1) return `${names} AND ${claimableVersions(t, groups[0]?.versions ?? [1])}`;
  const alternatives = groups.map(
    (group) => `(${t}.workflow_name = ANY(${varcharArrayLiteral(group.names)}) AND ${versionCondition(t, group.versions)})`,
  );
  return `${names} AND ${t}.held_at IS NULL AND (${alternatives.join(' OR ')})`;
}

/**
 * Condition: not held, and of one of `versions` of its workflow (a claim takes only the versions
 * its process registers). `coalesce(workflow_version, 1)`: NULL is version 1 (tasks of workflows
 * that declare no version, and every task older than versions).
 */
export function claimableVersions(t: string, versions: readonly number[]): string {
  return `${t}.held_at IS NULL AND ${versionCondition(t, versions.length ? versions : [1])}`;
}

function versionCondition(t: string, versions: readonly number[]): string {
  if (versions.length === 1) return `coalesce(${t}.workflow_version, 1) = ${countLiteral(versions[0])}`;
  return `coalesce(${t}.workflow_version, 1) = ANY(ARRAY[${versions.map(countLiteral).join(', ')}]::int[])`;
}

/** No worker holds the task: the columns a claim sets, cleared. */
const CLAIM_CLEARED = 'worker_id = NULL, claim_token = NULL, heartbeat_at = NULL';

/**
 * The SET lists of the moves, each naming every lifecycle column it sets or clears (a statement
 * may add the move's payload: an output, an error, a retry counted). `t` is the updated row's
 * alias where a value keeps the row's own; SQL expressions are passed as they are.
 */
export const MOVE = {
  /** pending -> running under a new claim: `workerId` an SQL expression; `startedAt` the first claim's time. */
  claim: (workerId: string, t = 't', startedAt = 'duraflow_now()') =>
    `status = 'running', worker_id = ${workerId}, claim_token = gen_random_uuid(), started_at = COALESCE(${t}.started_at, ${startedAt}), ` +
    'heartbeat_at = now(), updated_at = duraflow_now()',
  /** The claim is still owned: its heartbeat. */
  renew: 'heartbeat_at = now()',
  /** running -> pending, runnable as it was, no retry counted. */
  release: `status = 'pending', ${CLAIM_CLEARED}, updated_at = duraflow_now()`,
  /** running -> pending until `wakeAt` (an SQL timestamptz): a wait that is not over. */
  suspend: (wakeAt: string) => `status = 'pending', scheduled_at = ${wakeAt}, ${CLAIM_CLEARED}, updated_at = duraflow_now()`,
  /** pending (waiting) -> runnable now. */
  wake: 'scheduled_at = duraflow_now(), updated_at = duraflow_now()',
  /** running -> pending, held with `error` (the NonDeterminismError as jsonb). */
  hold: (error: string) => `status = 'pending', held_at = duraflow_now(), error = ${error}, ${CLAIM_CLEARED}, updated_at = duraflow_now()`,
  /** held -> pending: the hold and its error cleared. */
  resume: 'held_at = NULL, error = NULL, updated_at = duraflow_now()',
  /** -> a terminal `status` (an SQL expression): completed, failed, cancelled, or a rollback's end. */
  finish: (status: string) => `status = ${status}, completed_at = duraflow_now(), updated_at = duraflow_now()`,
  /** running -> running, rolling back for `reason` (an SQL expression). */
  beginRollback: (reason: string) => `rollback_reason = ${reason}, updated_at = duraflow_now()`,
  /** pending | running -> pending, its steps to be undone by whoever claims it next (a cancel with compensation). */
  handOver: `status = 'pending', rollback_reason = 'cancelled', scheduled_at = duraflow_now(), ${CLAIM_CLEARED}, updated_at = duraflow_now()`,
  /** pending | running -> running under a new claim of `workerId` (an SQL expression), rolling back for a cancel. */
  takeOver: (workerId: string, t = 't') =>
    `status = 'running', rollback_reason = 'cancelled', worker_id = ${workerId}, claim_token = gen_random_uuid(), heartbeat_at = now(), ` +
    `started_at = COALESCE(${t}.started_at, duraflow_now()), completed_at = NULL, updated_at = duraflow_now()`,
  /** The reaper's move of a stale running task (and the recover move's): `status` and `completedAt` SQL expressions decided per row (a retry counted, a rollback begun: the statement's payload). */
  reap: (status: string, completedAt: string) =>
    `status = ${status}, completed_at = ${completedAt}, ${CLAIM_CLEARED}, updated_at = duraflow_now()`,
  /**
   * failed | cancelled (not compensated) -> pending, runnable now: its retry counter reset, its
   * error and rollback reason cleared, the status it left and its error appended to `history`.
   */
  retry: (t = 't') =>
    `status = 'pending', scheduled_at = duraflow_now(), retry_count = 0, error = NULL, output = NULL, rollback_reason = NULL, held_at = NULL, ` +
    `completed_at = NULL, ${CLAIM_CLEARED}, updated_at = duraflow_now(), history = COALESCE(${t}.history, '[]'::jsonb) || jsonb_build_array(` +
    `jsonb_build_object('kind', 'retried', 'at', duraflow_now(), 'fromStatus', ${t}.status, 'error', ${t}.error))`,
  /** partial_rollback -> `status` (an SQL expression): its last dead letter resolved. */
  resolve: (status: string) => `status = ${status}, updated_at = duraflow_now()`,
} as const;
