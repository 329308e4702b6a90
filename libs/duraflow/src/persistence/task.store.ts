import { Injectable } from '@nestjs/common';
import { TASK_FINISHED_CHANNEL, TASK_SUBMITTED_CHANNEL } from '../duraflow.constants';
import { AgentTask, RollbackReason } from '../entities/agent-task.entity';
import { TaskStatus } from '../interfaces/task-status';
import { KeysetPosition, keysetPageSql, olderThan, StoredPage } from './cursor';
import { DuraflowDatabase, SqlExecutor } from './duraflow-database';
import { leftToUndo, ownedBy, ownedTaskRows } from './fencing';
import { countLiteral, textLiteral, varcharArrayLiteral } from './literals';
import { TASK_COLUMNS, toAgentTask } from './row-mappers';

export interface NewTask {
  workflowName: string;
  /** Already serialized JSON. */
  inputJson: string;
  priority: number;
  scheduledAt: Date | null;
  maxRetries: number;
  idempotencyKey: string | null;
}

/** A task this worker claimed, with the fencing token every later write must carry. */
export interface ClaimedTask {
  task: AgentTask;
  claimToken: string;
  /**
   * Never claimed before (`started_at` was empty): no step of it can have been written, so
   * the run skips reading its checkpoints.
   */
  fresh?: boolean;
}

export interface TaskListFilter {
  status?: string;
  workflowName?: string;
  /** Created at or after this time. */
  createdAfter?: Date;
  /** Created before this time. */
  createdBefore?: Date;
  limit: number;
  /** Bytes a page may hold (its first row always). */
  maxBytes: number;
  /** Keyset position: strictly older than this. */
  after?: KeysetPosition;
}

export interface TaskListRow {
  task: AgentTask;
  createdAtMicros: string;
}

/** What the reaper did with one stale task. */
export interface ReapedTask {
  id: string;
  /** The status it was left in. */
  status: TaskStatus;
  retryCount: number;
  workflowName: string;
  /** The `code` of the task's error (null while it has none). */
  errorCode: string | null;
  /** requeue: to run again; rollback: retries used up, to undo its steps; abandon/end: finished by the reaper. */
  action: 'requeue' | 'rollback' | 'abandon' | 'end';
}

/** A write guarded by the claim: lands only while this claim still owns a running task. */
const OWNED = ownedBy('$1', '$2');

/**
 * The claim's transaction (through the pool, the claim alone) runs with these, LOCAL to it.
 *
 * Planner: the claim's ORDER BY is idx_agent_tasks_claim's order and its rows are the index's,
 * so an ordered walk of that index, stopped after `limit` locked rows, costs the same at any
 * queue depth. The planner picks it only when the statistics know the backlog: after a burst
 * of submits into a table analyzed empty, never analyzed, or analyzed while every task was
 * finished, it expects one pending row and sorts a bitmap scan of every pending task instead
 * (~20 ms a claim at 100k pending, against ~0.2 ms). With every other way to deliver rows in
 * that order off (sorts, bitmap and sequential scans), and hash and merge joins off for the
 * lookup of the claimed rows by id, the walk is the one plan left whatever the statistics
 * say. jit off: were the walk ever impossible, the disabled plan left would cost over 10^10
 * and be JIT-compiled on every claim.
 *
 * synchronous_commit: the claim commits without waiting for its WAL flush. Safe: losing it in
 * a server crash only puts the task back to pending, and no write of the run can outlive it
 * (each checkpoint's synchronous commit flushes the WAL up to itself, the claim included).
 */
const CLAIM_SETTINGS = `SELECT ${[
  'enable_sort',
  'enable_incremental_sort',
  'enable_bitmapscan',
  'enable_seqscan',
  'enable_hashjoin',
  'enable_mergejoin',
  'jit',
  'synchronous_commit',
]
  .map((setting) => `set_config('${setting}', 'off', true)`)
  .join(', ')}`;

/** Every statement on `agent_tasks`. */
@Injectable()
export class TaskStore {
  constructor(private readonly db: DuraflowDatabase) {}

  /**
   * Inserts a task, or finds the one that already holds its idempotency key: the unique
   * partial index arbitrates concurrent submits (a second one waits for the first to commit).
   * The NOTIFY is sent by PostgreSQL on commit, so a worker never wakes for a rolled-back task.
   * `sameInput` compares the inputs as jsonb (key order and number spelling do not matter).
   */
  async insertTask(executor: SqlExecutor, task: NewTask): Promise<{ task: AgentTask; created: boolean; sameInput: boolean }> {
    const values = [task.workflowName, task.inputJson, task.priority, task.scheduledAt, task.maxRetries, task.idempotencyKey];
    for (let attempt = 0; attempt < 3; attempt++) {
      const inserted = await executor.query(
        `WITH inserted AS (
           INSERT INTO agent_tasks (workflow_name, input, priority, scheduled_at, max_retries, idempotency_key)
           VALUES ($1, $2::jsonb, $3, $4, $5, $6)
           ON CONFLICT (workflow_name, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
           RETURNING ${TASK_COLUMNS}
         )
         SELECT inserted.*,
                CASE WHEN scheduled_at IS NULL OR scheduled_at <= now()
                     THEN pg_notify('${TASK_SUBMITTED_CHANNEL}', workflow_name) END AS notified
         FROM inserted`,
        values,
        'duraflow_insert_task',
      );
      if (inserted.rows.length) return { task: toAgentTask(inserted.rows[0]), created: true, sameInput: true };
      const existing = await executor.query(
        `SELECT ${TASK_COLUMNS}, input = $3::jsonb AS same_input
         FROM agent_tasks WHERE workflow_name = $1 AND idempotency_key = $2`,
        [task.workflowName, task.idempotencyKey, task.inputJson],
      );
      if (existing.rows.length) {
        return { task: toAgentTask(existing.rows[0]), created: false, sameInput: existing.rows[0].same_input === true };
      }
    }
    throw new Error(`Could not insert or find the task with idempotency key "${task.idempotencyKey}"; try again.`);
  }

  /**
   * Inserts many tasks of one workflow in one statement, with one NOTIFY for all of them (a
   * NOTIFY serializes commits across the server, so one per batch rather than one per task).
   */
  async insertTasks(
    executor: SqlExecutor,
    batch: { workflowName: string; inputsJson: string[]; priority: number; scheduledAt: Date | null; maxRetries: number },
  ): Promise<AgentTask[]> {
    const { rows } = await executor.query(
      `WITH inserted AS (
         INSERT INTO agent_tasks (workflow_name, input, priority, scheduled_at, max_retries)
         SELECT $1, input, $3, $4, $5 FROM unnest($2::jsonb[]) WITH ORDINALITY AS i(input, n) ORDER BY n
         RETURNING ${TASK_COLUMNS}
       ), notified AS (
         SELECT pg_notify('${TASK_SUBMITTED_CHANNEL}', $1) WHERE $4::timestamptz IS NULL OR $4::timestamptz <= now()
       )
       SELECT inserted.* FROM inserted, (SELECT count(*) FROM notified) AS sent`,
      [batch.workflowName, batch.inputsJson, batch.priority, batch.scheduledAt, batch.maxRetries],
      'duraflow_insert_tasks',
    );
    return rows.map(toAgentTask);
  }

  async findTask(id: string): Promise<AgentTask | null> {
    const { rows } = await this.db.query(`SELECT ${TASK_COLUMNS} FROM agent_tasks WHERE id = $1`, [id], 'duraflow_find_task');
    return rows.length ? toAgentTask(rows[0]) : null;
  }

  /**
   * Newest first on the keyset (created_at, id): one index range scan per page, no OFFSET; cut
   * to `maxBytes` in the database, so tasks with large inputs or outputs never make a page huge.
   */
  async listTasks(filter: TaskListFilter): Promise<StoredPage<TaskListRow>> {
    const where: string[] = ['deleted_at IS NULL'];
    const values: unknown[] = [];
    if (filter.status) {
      values.push(filter.status);
      where.push(`status = $${values.length}`);
    }
    where.push(...taskFilterConditions(filter, values));
    if (filter.after) {
      values.push(filter.after.createdAtMicros, filter.after.id);
      where.push(olderThan(values.length - 1));
    }
    values.push(filter.limit, filter.maxBytes);
    const { rows } = await this.db.query(
      keysetPageSql('agent_tasks', TASK_COLUMNS, where, `$${values.length - 1}`, `$${values.length}`),
      values,
    );
    return {
      rows: rows.map((row) => ({ task: toAgentTask(row), createdAtMicros: row.created_at_micros })),
      more: rows.length > 0 && rows[0].more,
    };
  }

  /**
   * Claims up to `limit` runnable tasks in priority order. SKIP LOCKED lets concurrent
   * claimers pass each other's rows. Each claim gets a new fencing token.
   *
   * The plan is an ordered walk of idx_agent_tasks_claim whatever the statistics say
   * (CLAIM_SETTINGS), sent with its settings in one round trip: the simple query protocol
   * carries no parameters, so the values are written in as literals.
   */
  async claimTasks(workerId: string, workflowNames: string[], limit: number): Promise<ClaimedTask[]> {
    const { rows } = await this.db.query(
      `/* duraflow_claim_tasks */ ${CLAIM_SETTINGS};
       UPDATE agent_tasks t
       SET status = 'running', worker_id = ${textLiteral(workerId)}, claim_token = gen_random_uuid(),
           started_at = COALESCE(t.started_at, now()), heartbeat_at = now(), updated_at = now()
       FROM (
         SELECT id, started_at IS NULL AS fresh FROM agent_tasks
         WHERE status = 'pending' AND deleted_at IS NULL
           AND (scheduled_at IS NULL OR scheduled_at <= now())
           AND workflow_name = ANY(${varcharArrayLiteral(workflowNames)})
         ORDER BY priority DESC, created_at, id
         LIMIT ${countLiteral(limit)}
         FOR UPDATE SKIP LOCKED
       ) claimable
       WHERE t.id = claimable.id
       RETURNING ${TASK_COLUMNS.replace(/(^|,\s*)(\w+)/g, '$1t.$2')}, t.claim_token, claimable.fresh`,
    );
    return rows
      .map((row) => ({ task: toAgentTask(row), claimToken: row.claim_token as string, fresh: row.fresh as boolean }))
      .sort((a, b) => b.task.priority - a.task.priority || a.task.createdAt.getTime() - b.task.createdAt.getTime());
  }

  /**
   * Fenced, for many runs in one statement: each task completes only while its claim owns it.
   * One NOTIFY names them all (ids comma-separated; callers keep batches under 200 ids, within
   * NOTIFY's 8000-byte payload). Returns the ids that completed.
   */
  async completeTasks(ids: string[], claimTokens: string[], outputs: Array<string | null>): Promise<Set<string>> {
    const { rows } = await this.db.query<{ id: string }>(
      `WITH c AS (
         SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::jsonb[]) AS c(task_id, claim_token, output)
       ), owned AS (${ownedTaskRows('c', 'NO KEY UPDATE')}), done AS (
         UPDATE agent_tasks t
         SET status = 'completed', output = c.output, completed_at = now(), updated_at = now()
         FROM owned JOIN c ON c.task_id = owned.id AND c.claim_token = owned.claim_token
         WHERE t.id = owned.id
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

  /** Fenced: the final status of a run that failed (`failed`, or a rollback status). */
  async finishTaskWithError(id: string, claimToken: string, status: TaskStatus, errorJson: string): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `WITH done AS (
         UPDATE agent_tasks SET status = $3, error = $4::jsonb, completed_at = now(), updated_at = now()
         WHERE ${OWNED} RETURNING id
       )
       SELECT pg_notify('${TASK_FINISHED_CHANNEL}', id::text) FROM done`,
      [id, claimToken, status, errorJson],
      'duraflow_fail_task',
    );
    return rowCount > 0;
  }

  /**
   * Fenced: the run failed for good and its completed steps are about to be undone. The task
   * stays `running` (heartbeated, recoverable by the reaper) with `rollback_reason` set, so
   * whoever claims it next resumes the rollback instead of running the workflow again.
   */
  async beginRollback(id: string, claimToken: string, reason: RollbackReason, errorJson: string | null): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `UPDATE agent_tasks SET rollback_reason = $3, error = COALESCE($4::jsonb, error), updated_at = now()
       WHERE ${OWNED}`,
      [id, claimToken, reason, errorJson],
      'duraflow_begin_rollback',
    );
    return rowCount > 0;
  }

  /**
   * Fenced: the rollback is over. `cancelled` for a cancel; else `partial_rollback` when a
   * compensation of this task is in the dead-letter queue, `rolled_back` when there was
   * something to undo and it all was, `failed` when there was nothing to undo. The error stays.
   */
  async finishRollback(id: string, claimToken: string, reason: RollbackReason, undidSomething: boolean): Promise<TaskStatus | null> {
    // The task row is locked first and the queue read in a later statement, so a dead-letter
    // retry that resolved an entry meanwhile (it locks the same row) is seen.
    return this.db.transaction(async (tx) => {
      const owned = await tx.query(`SELECT 1 FROM agent_tasks WHERE ${OWNED} FOR UPDATE`, [id, claimToken]);
      if (!owned.rowCount) return null;
      const { rows } = await tx.query<{ status: TaskStatus }>(
        `WITH done AS (
           UPDATE agent_tasks
           SET status = CASE
                 WHEN $2 = 'cancelled' THEN 'cancelled'
                 WHEN EXISTS (SELECT 1 FROM dead_letter_queue WHERE task_id = $1) THEN 'partial_rollback'
                 WHEN $3 THEN 'rolled_back'
                 ELSE 'failed' END,
               completed_at = now(), updated_at = now()
           WHERE id = $1 RETURNING id, status
         )
         SELECT status, pg_notify('${TASK_FINISHED_CHANNEL}', id::text) FROM done`,
        [id, reason, undidSomething],
        'duraflow_finish_rollback',
      );
      return rows[0]?.status ?? null;
    });
  }

  /**
   * cancel(id, { compensate: true }): a pending or running task with steps to undo is taken
   * over for a `cancelled` rollback under a new claim (the worker running it is fenced out and
   * told through NOTIFY); one with nothing to undo is simply cancelled. The task row is locked
   * before the steps are read, so a checkpoint committed meanwhile is seen.
   */
  async takeOverForCancelRollback(
    id: string,
    workerId: string,
  ): Promise<{ previousStatus: string | null; task: AgentTask | null; claimToken: string | null }> {
    return this.db.transaction(async (tx) => {
      const locked = await tx.query<{ status: string }>(`SELECT status FROM agent_tasks WHERE id = $1 FOR UPDATE`, [id]);
      if (!locked.rows.length) return { previousStatus: null, task: null, claimToken: null };
      const previousStatus = locked.rows[0].status;
      if (previousStatus !== 'pending' && previousStatus !== 'running') return { previousStatus, task: null, claimToken: null };
      const { rows } = await tx.query(
        `WITH undo AS (
           SELECT EXISTS (
             SELECT 1 FROM step_runs s WHERE s.task_id = $1 AND ${leftToUndo('s')}
           ) AS needed
         ), updated AS (
           UPDATE agent_tasks t
           SET status = CASE WHEN undo.needed THEN 'running' ELSE 'cancelled' END,
               rollback_reason = CASE WHEN undo.needed THEN 'cancelled' ELSE t.rollback_reason END,
               worker_id = CASE WHEN undo.needed THEN $2 ELSE t.worker_id END,
               claim_token = CASE WHEN undo.needed THEN gen_random_uuid() ELSE t.claim_token END,
               heartbeat_at = CASE WHEN undo.needed THEN now() ELSE t.heartbeat_at END,
               started_at = COALESCE(t.started_at, now()),
               completed_at = CASE WHEN undo.needed THEN NULL ELSE now() END,
               updated_at = now()
           FROM undo WHERE t.id = $1
           RETURNING ${TASK_COLUMNS.replace(/(^|,\s*)(\w+)/g, '$1t.$2')}, t.claim_token, undo.needed
         )
         SELECT updated.*, pg_notify('${TASK_FINISHED_CHANNEL}', id::text) FROM updated`,
        [id, workerId],
      );
      const row = rows[0];
      return { previousStatus, task: toAgentTask(row), claimToken: row.needed ? row.claim_token : null };
    });
  }

  /**
   * Whether this claim still owns its running task. Asked when a fenced write changed nothing:
   * a write retried after its first try committed (the reply was lost) also changes nothing,
   * yet the claim still owns the task.
   */
  async ownsTask(id: string, claimToken: string): Promise<boolean> {
    const { rowCount } = await this.db.query(`SELECT 1 FROM agent_tasks WHERE ${OWNED}`, [id, claimToken], 'duraflow_owns_task');
    return rowCount > 0;
  }

  /** One statement per process per tick; returns the claim tokens that still own their task. */
  async heartbeat(ids: string[], claimTokens: string[]): Promise<Set<string>> {
    const { rows } = await this.db.query<{ claim_token: string }>(
      `WITH c AS (SELECT * FROM unnest($1::uuid[], $2::uuid[]) AS c(task_id, claim_token)),
       owned AS (${ownedTaskRows('c', 'NO KEY UPDATE')})
       UPDATE agent_tasks t SET heartbeat_at = now() FROM owned WHERE t.id = owned.id
       RETURNING t.claim_token`,
      [ids, claimTokens],
      'duraflow_heartbeat',
    );
    return new Set(rows.map((row) => row.claim_token));
  }

  /** Hands claimed tasks back to `pending` without counting a retry (graceful shutdown). */
  async releaseTasks(ids: string[], claimTokens: string[]): Promise<string[]> {
    const { rows } = await this.db.query<{ id: string; workflow_name: string }>(
      `WITH released AS (
         UPDATE agent_tasks t
         SET status = 'pending', worker_id = NULL, claim_token = NULL, heartbeat_at = NULL, updated_at = now()
         FROM unnest($1::uuid[], $2::uuid[]) AS owned(id, claim_token)
         WHERE t.id = owned.id AND t.claim_token = owned.claim_token AND t.status = 'running'
         RETURNING t.id, t.workflow_name
       )
       SELECT id, pg_notify('${TASK_SUBMITTED_CHANNEL}', workflow_name) FROM released`,
      [ids, claimTokens],
    );
    return rows.map((row) => row.id);
  }

  /**
   * Cancels a pending or running task. A running one is fenced out at once (its claim no
   * longer owns a running task); the NOTIFY tells its worker to abort the current step.
   */
  async cancelTask(id: string): Promise<{ task: AgentTask | null; previousStatus: string | null }> {
    const { rows } = await this.db.query(
      `WITH target AS (
         SELECT id, status FROM agent_tasks WHERE id = $1 FOR UPDATE
       ), cancelled AS (
         UPDATE agent_tasks t SET status = 'cancelled', completed_at = now(), updated_at = now()
         FROM target WHERE t.id = target.id AND target.status IN ('pending', 'running')
         RETURNING ${TASK_COLUMNS.replace(/(^|,\s*)(\w+)/g, '$1t.$2')}
       )
       SELECT target.status AS previous_status, cancelled.*,
              (SELECT pg_notify('${TASK_FINISHED_CHANNEL}', id::text) FROM cancelled) AS notified
       FROM target LEFT JOIN cancelled ON cancelled.id = target.id`,
      [id],
    );
    if (!rows.length) return { task: null, previousStatus: null };
    const row = rows[0];
    return { task: row.id ? toAgentTask(row) : null, previousStatus: row.previous_status };
  }

  /**
   * Recovers running tasks whose heartbeat is older than `staleAfterMs`, in one statement that
   * locks each stale row (SKIP LOCKED) and re-checks it, so two reapers never double-count:
   * - retries left: back to `pending`, one more retry counted (a rollback in progress resumes);
   * - retries used up, steps to undo: back to `pending` for its rollback (error MAX_RETRIES_EXCEEDED);
   * - retries used up during a rollback: the compensations not yet run go to the dead-letter
   *   queue, and the task ends `partial_rollback` (`cancelled` for a cancel);
   * - retries used up, nothing (left) to undo: the task ends (`failed` with MAX_RETRIES_EXCEEDED,
   *   or the rollback's final status).
   */
  async reapStaleTasks(staleAfterMs: number): Promise<ReapedTask[]> {
    const { rows } = await this.db.query(
      `WITH stale AS (
         SELECT t.id, t.retry_count, t.max_retries, t.rollback_reason,
                EXISTS (
                  SELECT 1 FROM step_runs s WHERE s.task_id = t.id AND ${leftToUndo('s')}
                ) AS undo_left,
                EXISTS (SELECT 1 FROM dead_letter_queue d WHERE d.task_id = t.id) AS dead_lettered
         FROM agent_tasks t
         WHERE t.status = 'running' AND t.heartbeat_at < now() - $1 * interval '1 millisecond'
         FOR UPDATE OF t SKIP LOCKED
       ), decided AS (
         SELECT stale.*,
                CASE WHEN COALESCE(retry_count, 0) < COALESCE(max_retries, 0) THEN 'requeue'
                     WHEN rollback_reason IS NULL AND undo_left THEN 'rollback'
                     WHEN rollback_reason IS NOT NULL AND undo_left THEN 'abandon'
                     ELSE 'end' END AS action
         FROM stale
       ), abandoned AS (
         INSERT INTO dead_letter_queue (task_id, step_id, error)
         SELECT s.task_id, s.id, jsonb_build_object(
                  'code', 'MAX_RETRIES_EXCEEDED', 'name', 'MaxRetriesExceededError', 'stepKey', s.step_key,
                  'compensationFn', s.compensation_fn,
                  'message', 'The worker running this rollback stopped heartbeating and the task''s retries are used up; '
                             || 'the compensation was not run (or not recorded). Retry it from the dead-letter queue.')
         FROM step_runs s JOIN decided ON decided.id = s.task_id AND decided.action = 'abandon'
         WHERE ${leftToUndo('s')}
         ON CONFLICT (step_id) DO NOTHING
       ), reaped AS (
         UPDATE agent_tasks t
         SET status = CASE
               WHEN d.action IN ('requeue', 'rollback') THEN 'pending'
               WHEN t.rollback_reason = 'cancelled' THEN 'cancelled'
               WHEN d.action = 'abandon' OR d.dead_lettered THEN 'partial_rollback'
               WHEN t.rollback_reason IS NOT NULL THEN 'rolled_back'
               ELSE 'failed' END,
             retry_count = CASE WHEN d.action = 'requeue' THEN COALESCE(t.retry_count, 0) + 1 ELSE t.retry_count END,
             rollback_reason = CASE WHEN d.action = 'rollback' THEN 'failed' ELSE t.rollback_reason END,
             error = CASE WHEN d.action = 'requeue' OR t.rollback_reason IS NOT NULL THEN t.error ELSE jsonb_build_object(
               'code', 'MAX_RETRIES_EXCEEDED', 'name', 'MaxRetriesExceededError',
               'message', 'The task''s worker stopped heartbeating ' || (COALESCE(t.retry_count, 0) + 1)
                          || ' time(s); max_retries is ' || COALESCE(t.max_retries, 0) || '.') END,
             completed_at = CASE WHEN d.action IN ('requeue', 'rollback') THEN NULL ELSE now() END,
             worker_id = NULL, claim_token = NULL, heartbeat_at = NULL, updated_at = now()
         FROM decided d
         WHERE t.id = d.id
         RETURNING t.id, t.status, t.retry_count, t.workflow_name, t.error ->> 'code' AS error_code, d.action
       )
       SELECT id, status, retry_count, workflow_name, error_code, action,
              pg_notify(CASE WHEN status = 'pending' THEN '${TASK_SUBMITTED_CHANNEL}' ELSE '${TASK_FINISHED_CHANNEL}' END,
                        CASE WHEN status = 'pending' THEN workflow_name ELSE id::text END)
       FROM reaped`,
      [staleAfterMs],
      'duraflow_reap',
    );
    return rows.map((row) => ({ id: row.id, status: row.status, retryCount: row.retry_count, workflowName: row.workflow_name, errorCode: row.error_code, action: row.action }));
  }

  /**
   * Tasks per status. It reads every row in the range (a dashboard's overview, not a hot path):
   * on a large table, narrow it with a time range, which idx_agent_tasks_created serves.
   */
  async countTasksByStatus(filter: Pick<TaskListFilter, 'workflowName' | 'createdAfter' | 'createdBefore'>): Promise<Map<string, number>> {
    const values: unknown[] = [];
    const where = ['deleted_at IS NULL', ...taskFilterConditions(filter, values)];
    const { rows } = await this.db.query<{ status: string; count: string }>(
      `SELECT status, count(*) AS count FROM agent_tasks WHERE ${where.join(' AND ')} GROUP BY status`,
      values,
    );
    return new Map(rows.map((row) => [row.status, Number(row.count)]));
  }
}

/** WHERE conditions for the workflow and creation-time filters, their values pushed onto `values`. */
function taskFilterConditions(filter: Pick<TaskListFilter, 'workflowName' | 'createdAfter' | 'createdBefore'>, values: unknown[]): string[] {
  const where: string[] = [];
  if (filter.workflowName) {
    values.push(filter.workflowName);
    where.push(`workflow_name = $${values.length}`);
  }
  if (filter.createdAfter) {
    values.push(filter.createdAfter);
    where.push(`created_at >= $${values.length}`);
  }
  if (filter.createdBefore) {
    values.push(filter.createdBefore);
    where.push(`created_at < $${values.length}`);
  }
  return where;
}
