import { Injectable } from '@nestjs/common';
import { TASK_FINISHED_CHANNEL, TASK_SUBMITTED_CHANNEL } from '../duraflow.constants';
import { AgentTask } from '../entities/agent-task.entity';
import { TaskStatus } from '../interfaces/task-status';
import { DuraflowDatabase, SqlExecutor } from './duraflow-database';
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
}

export interface TaskListFilter {
  status?: string;
  workflowName?: string;
  limit: number;
  /** Keyset position: strictly older than this (created_at in µs since the epoch, id). */
  after?: { createdAtMicros: string; id: string };
}

export interface TaskListRow {
  task: AgentTask;
  createdAtMicros: string;
}

/** A write guarded by the claim: lands only while this claim still owns a running task. */
const OWNED = `id = $1 AND claim_token = $2 AND status = 'running'`;

/** Every statement on `agent_tasks`. */
@Injectable()
export class TaskStore {
  constructor(private readonly db: DuraflowDatabase) {}

  /**
   * Inserts a task, or finds the one that already holds its idempotency key: the unique
   * partial index arbitrates concurrent submits (a second one waits for the first to commit).
   * The NOTIFY is sent by PostgreSQL on commit, so a worker never wakes for a rolled-back task.
   */
  async insertTask(executor: SqlExecutor, task: NewTask): Promise<{ task: AgentTask; created: boolean }> {
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
      if (inserted.rows.length) return { task: toAgentTask(inserted.rows[0]), created: true };
      const existing = await executor.query(
        `SELECT ${TASK_COLUMNS} FROM agent_tasks WHERE workflow_name = $1 AND idempotency_key = $2`,
        [task.workflowName, task.idempotencyKey],
      );
      if (existing.rows.length) return { task: toAgentTask(existing.rows[0]), created: false };
    }
    throw new Error(`Could not insert or find the task with idempotency key "${task.idempotencyKey}"; try again.`);
  }

  async findTask(id: string): Promise<AgentTask | null> {
    const { rows } = await this.db.query(`SELECT ${TASK_COLUMNS} FROM agent_tasks WHERE id = $1`, [id], 'duraflow_find_task');
    return rows.length ? toAgentTask(rows[0]) : null;
  }

  /** Newest first on the keyset (created_at, id): one index range scan per page, no OFFSET. */
  async listTasks(filter: TaskListFilter): Promise<TaskListRow[]> {
    const where: string[] = ['deleted_at IS NULL'];
    const values: unknown[] = [];
    if (filter.status) {
      values.push(filter.status);
      where.push(`status = $${values.length}`);
    }
    if (filter.workflowName) {
      values.push(filter.workflowName);
      where.push(`workflow_name = $${values.length}`);
    }
    if (filter.after) {
      values.push(filter.after.createdAtMicros, filter.after.id);
      where.push(
        `(created_at, id) < (timestamptz 'epoch' + $${values.length - 1}::bigint * interval '1 microsecond', $${values.length}::uuid)`,
      );
    }
    values.push(filter.limit);
    const { rows } = await this.db.query(
      `SELECT ${TASK_COLUMNS},
              (extract(epoch FROM created_at) * 1000000)::bigint::text AS created_at_micros
       FROM agent_tasks WHERE ${where.join(' AND ')}
       ORDER BY created_at DESC, id DESC LIMIT $${values.length}`,
      values,
    );
    return rows.map((row) => ({ task: toAgentTask(row), createdAtMicros: row.created_at_micros }));
  }

  /**
   * Claims up to `limit` runnable tasks in priority order. SKIP LOCKED lets concurrent
   * claimers pass each other's rows; the inner ORDER BY walks idx_agent_tasks_claim.
   * Each claim gets a new fencing token.
   */
  async claimTasks(workerId: string, workflowNames: string[], limit: number): Promise<ClaimedTask[]> {
    const { rows } = await this.db.query(
      `UPDATE agent_tasks t
       SET status = 'running', worker_id = $1, claim_token = gen_random_uuid(),
           started_at = COALESCE(t.started_at, now()), heartbeat_at = now(), updated_at = now()
       FROM (
         SELECT id FROM agent_tasks
         WHERE status = 'pending' AND deleted_at IS NULL
           AND (scheduled_at IS NULL OR scheduled_at <= now())
           AND workflow_name = ANY($2::varchar[])
         ORDER BY priority DESC, created_at, id
         LIMIT $3
         FOR UPDATE SKIP LOCKED
       ) claimable
       WHERE t.id = claimable.id
       RETURNING ${TASK_COLUMNS.replace(/(^|,\s*)(\w+)/g, '$1t.$2')}, t.claim_token`,
      [workerId, workflowNames, limit],
      'duraflow_claim_tasks',
    );
    return rows
      .map((row) => ({ task: toAgentTask(row), claimToken: row.claim_token as string }))
      .sort((a, b) => b.task.priority - a.task.priority || a.task.createdAt.getTime() - b.task.createdAt.getTime());
  }

  /** Fenced: a stale claim completes nothing. */
  async completeTask(id: string, claimToken: string, outputJson: string | null): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `WITH done AS (
         UPDATE agent_tasks SET status = 'completed', output = $3::jsonb, completed_at = now(), updated_at = now()
         WHERE ${OWNED} RETURNING id
       )
       SELECT pg_notify('${TASK_FINISHED_CHANNEL}', id::text) FROM done`,
      [id, claimToken, outputJson],
      'duraflow_complete_task',
    );
    return rowCount > 0;
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

  /** One statement per worker per tick; returns the ids this worker still owns. */
  async heartbeat(ids: string[], claimTokens: string[]): Promise<Set<string>> {
    const { rows } = await this.db.query<{ id: string }>(
      `UPDATE agent_tasks t SET heartbeat_at = now()
       FROM unnest($1::uuid[], $2::uuid[]) AS owned(id, claim_token)
       WHERE t.id = owned.id AND t.claim_token = owned.claim_token AND t.status = 'running'
       RETURNING t.id`,
      [ids, claimTokens],
      'duraflow_heartbeat',
    );
    return new Set(rows.map((row) => row.id));
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
   * Recovers running tasks whose heartbeat is older than `staleAfterMs`: back to `pending`
   * with one more retry counted, or `failed` once retries are used up. One statement that
   * re-checks staleness on the row it updates, so two reapers at once never double-count.
   */
  async reapStaleTasks(staleAfterMs: number): Promise<Array<{ id: string; status: string; retryCount: number }>> {
    const { rows } = await this.db.query(
      `WITH reaped AS (
         UPDATE agent_tasks
         SET status = CASE WHEN retry_count < max_retries THEN 'pending' ELSE 'failed' END,
             retry_count = CASE WHEN retry_count < max_retries THEN retry_count + 1 ELSE retry_count END,
             error = CASE WHEN retry_count < max_retries THEN error ELSE jsonb_build_object(
               'code', 'MAX_RETRIES_EXCEEDED', 'name', 'MaxRetriesExceededError',
               'message', 'The task''s worker stopped heartbeating ' || (retry_count + 1) || ' time(s); max_retries is ' || max_retries || '.') END,
             completed_at = CASE WHEN retry_count < max_retries THEN NULL ELSE now() END,
             worker_id = NULL, claim_token = NULL, heartbeat_at = NULL, updated_at = now()
         WHERE status = 'running' AND heartbeat_at < now() - $1 * interval '1 millisecond'
         RETURNING id, status, retry_count, workflow_name
       )
       SELECT id, status, retry_count,
              pg_notify(CASE WHEN status = 'pending' THEN '${TASK_SUBMITTED_CHANNEL}' ELSE '${TASK_FINISHED_CHANNEL}' END,
                        CASE WHEN status = 'pending' THEN workflow_name ELSE id::text END)
       FROM reaped`,
      [staleAfterMs],
    );
    return rows.map((row) => ({ id: row.id, status: row.status, retryCount: row.retry_count }));
  }
}
