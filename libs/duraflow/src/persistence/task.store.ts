import { Injectable } from '@nestjs/common';
import { TASK_FINISHED_CHANNEL, TASK_SUBMITTED_CHANNEL } from '../domain/duraflow.constants';
import { AgentTask, RollbackReason } from '../domain/entities/agent-task.entity';
import { TaskStatus } from '../domain/task-status';
import { KeysetPosition, keysetPageSql, olderThan, StoredPage } from './cursor';
import { DuraflowDatabase, SqlExecutor } from './duraflow-database';
import { ownedBy, ownedTaskRows } from './fencing';
import { ClaimableWorkflows, claimableCondition } from './claimable-workflows';
import { countLiteral, textLiteral } from './literals';
import { TASK_COLUMNS, TASK_COLUMNS_OF_T, toAgentTask } from './row-mappers';
import { cancelTask } from './sql/cancel-task';
import { finishRollback } from './sql/finish-rollback';
import { ReapedTask, reapStaleTasks } from './sql/reap-stale-tasks';
import type { LeaderFence } from './leader-fence';
import { CancelRollbackTakeOver, takeOverForCancelRollback } from './sql/take-over-for-cancel-rollback';

export interface NewTask {
  workflowName: string;
  /** Already serialized JSON. */
  inputJson: string;
  priority: number;
  scheduledAt: Date | null;
  maxRetries: number;
  idempotencyKey: string | null;
  /** The submitter's W3C trace context as JSON (OpenTelemetry), or null. */
  traceContextJson?: string | null;
  /** The workflow's declared version; null for a workflow that declares none (version 1). */
  workflowVersion: number | null;
  /** Flow control's key (validation/flow-limits.ts `concurrencyKeyOf`): null for a workflow without limits. */
  concurrencyKey?: string | null;
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
  /** The trace context stored at submit (`traceparent`, `tracestate`), continued by the run's span. */
  traceContext?: Record<string, string> | null;
}

export interface TaskListFilter {
  status?: string;
  workflowName?: string;
  /** Created at or after this time. */
  createdAfter?: Date;
  /** Created before this time. */
  createdBefore?: Date;
  /** Only tasks the determinism guard holds (true) or does not hold (false). */
  held?: boolean;
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

/**
 * When a pending task became (or becomes) runnable: its `scheduled_at` (a delayed submit, a
 * sleep's end, a wake-up) or else its creation. The claim serves runnable tasks in this order
 * within a priority, and idx_agent_tasks_claim holds it as its second key (migration
 * 1700000000200), so tasks waiting for a later time sort after every runnable one.
 */
const RUNNABLE_SINCE = `COALESCE(scheduled_at, created_at, '-infinity'::timestamptz)`;

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
export const CLAIM_SETTINGS = `SELECT ${[
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

/**
 * The rows a claim returned (the task's columns, claim_token, fresh, trace_context), in the
 * claim's order: priority, then the time each became runnable (UPDATE … RETURNING keeps no order).
 */
export function toClaimedTasks(rows: Array<Record<string, any>>): ClaimedTask[] {
  const runnableSince = (task: AgentTask) => (task.scheduledAt ?? task.createdAt)?.getTime() ?? -Infinity;
  return rows
    .map((row) => ({
      task: toAgentTask(row),
      claimToken: row.claim_token as string,
      fresh: row.fresh as boolean,
      traceContext: row.trace_context as Record<string, string> | null,
    }))
    .sort((a, b) => b.task.priority - a.task.priority || runnableSince(a.task) - runnableSince(b.task));
}

/**
 * The way in to `agent_tasks`: submit, reads and lists, claim, heartbeat, completion, failure,
 * cancel and hand-back, each written here but cancel's (sql/cancel-task.ts, which cancel's
 * take-over runs too). The operations that also write `step_runs` or `dead_letter_queue`, or
 * decide on what they hold, in the same statement or transaction (a reaping pass, the end of a
 * rollback, cancel's take-over) are written in `sql/`, one file per operation, and reached
 * through here: each starts by locking task rows.
 */
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
    const values = [
      task.workflowName,
      task.inputJson,
      task.priority,
      task.scheduledAt,
      task.maxRetries,
      task.idempotencyKey,
      task.traceContextJson ?? null,
      task.workflowVersion,
      task.concurrencyKey ?? null,
    ];
    for (let attempt = 0; attempt < 3; attempt++) {
      const inserted = await executor.query(
        `WITH inserted AS (
           INSERT INTO agent_tasks (workflow_name, input, priority, scheduled_at, max_retries, idempotency_key, trace_context, workflow_version, concurrency_key)
           VALUES ($1, $2::jsonb, $3, $4, $5, $6, $7::jsonb, $8, $9)
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
    batch: {
      workflowName: string;
      inputsJson: string[];
      priority: number;
      scheduledAt: Date | null;
      maxRetries: number;
      traceContextJson?: string | null;
      workflowVersion: number | null;
      /** One per input (flow control's key), or none for a workflow without limits. */
      concurrencyKeys?: Array<string | null>;
    },
  ): Promise<AgentTask[]> {
    const { rows } = await executor.query(
      `WITH inserted AS (
         INSERT INTO agent_tasks (workflow_name, input, priority, scheduled_at, max_retries, trace_context, workflow_version, concurrency_key)
         SELECT $1, input, $3, $4, $5, $6::jsonb, $7, ($8::varchar[])[n] FROM unnest($2::jsonb[]) WITH ORDINALITY AS i(input, n) ORDER BY n
         RETURNING ${TASK_COLUMNS}
       ), notified AS (
         SELECT pg_notify('${TASK_SUBMITTED_CHANNEL}', $1) WHERE $4::timestamptz IS NULL OR $4::timestamptz <= now()
       )
       SELECT inserted.* FROM inserted, (SELECT count(*) FROM notified) AS sent`,
      [
        batch.workflowName,
        batch.inputsJson,
        batch.priority,
        batch.scheduledAt,
        batch.maxRetries,
        batch.traceContextJson ?? null,
        batch.workflowVersion,
        batch.concurrencyKeys ?? [],
      ],
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
    // A held task is pending; a cancelled one keeps its held_at but is no longer held.
    if (filter.held !== undefined)
      where.push(filter.held ? "(status = 'pending' AND held_at IS NOT NULL)" : "(status <> 'pending' OR held_at IS NULL)");
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
   * Claims up to `limit` runnable tasks in priority order, then in the order they became
   * runnable (RUNNABLE_SINCE), of the (workflow, version) pairs given and not held
   * (claimable-workflows.ts). SKIP LOCKED lets concurrent claimers pass each other's
   * rows. Each claim gets a new fencing token.
   *
   * The plan is an ordered walk of idx_agent_tasks_claim whatever the statistics say
   * (CLAIM_SETTINGS), sent with its settings in one round trip: the simple query protocol
   * carries no parameters, so the values are written in as literals.
   */
  async claimTasks(workerId: string, workflows: ClaimableWorkflows, limit: number): Promise<ClaimedTask[]> {
    const { rows } = await this.db.query(
      `/* duraflow_claim_tasks */ ${CLAIM_SETTINGS};
       UPDATE agent_tasks t
       SET status = 'running', worker_id = ${textLiteral(workerId)}, claim_token = gen_random_uuid(),
           started_at = COALESCE(t.started_at, now()), heartbeat_at = now(), updated_at = now()
       FROM (
         SELECT id, started_at IS NULL AS fresh FROM agent_tasks
         WHERE status = 'pending' AND deleted_at IS NULL
           AND ${RUNNABLE_SINCE} <= now()
           AND ${claimableCondition(workflows)}
         ORDER BY priority DESC, ${RUNNABLE_SINCE}, id
         LIMIT ${countLiteral(limit)}
         FOR UPDATE SKIP LOCKED
       ) claimable
       WHERE t.id = claimable.id
       RETURNING ${TASK_COLUMNS_OF_T}, t.claim_token, claimable.fresh, t.trace_context`,
    );
    return toClaimedTasks(rows);
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

  /** Fenced: the rollback is over (sql/finish-rollback.ts). Null when the claim no longer owns the task. */
  finishRollback(id: string, claimToken: string, reason: RollbackReason, hadStepsToUndo: boolean): Promise<TaskStatus | null> {
    return finishRollback(this.db, id, claimToken, reason, hadStepsToUndo);
  }

  /** cancel(id, { compensate: true }): the task taken over for its rollback, or cancelled (sql/take-over-for-cancel-rollback.ts). */
  takeOverForCancelRollback(id: string, workerId: string): Promise<CancelRollbackTakeOver> {
    return takeOverForCancelRollback(this.db, id, workerId);
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
  cancelTask(id: string): Promise<{ task: AgentTask | null; previousStatus: string | null }> {
    return cancelTask(this.db, id);
  }

  /** One reaping pass over the tasks stale for longer than `staleAfterMs` (sql/reap-stale-tasks.ts). */
  reapStaleTasks(staleAfterMs: number, fence?: LeaderFence): Promise<ReapedTask[]> {
    return reapStaleTasks(this.db, staleAfterMs, fence);
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

  /** How many tasks the determinism guard holds (pending, held_at set), with the list's workflow and time filters. */
  async countHeldTasks(filter: Pick<TaskListFilter, 'workflowName' | 'createdAfter' | 'createdBefore'>): Promise<number> {
    const values: unknown[] = [];
    const where = ['deleted_at IS NULL', "status = 'pending'", 'held_at IS NOT NULL', ...taskFilterConditions(filter, values)];
    const { rows } = await this.db.query<{ count: string }>(
      `SELECT count(*) AS count FROM agent_tasks WHERE ${where.join(' AND ')}`,
      values,
    );
    return Number(rows[0].count);
  }
}

/** WHERE conditions for the workflow and creation-time filters, their values pushed onto `values`. */
function taskFilterConditions(
  filter: Pick<TaskListFilter, 'workflowName' | 'createdAfter' | 'createdBefore'>,
  values: unknown[],
): string[] {
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
