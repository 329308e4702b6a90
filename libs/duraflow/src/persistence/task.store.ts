import { Injectable, Optional } from '@nestjs/common';
import { decodedTask } from '../codec/decoded-rows';
import { PayloadCoder } from '../codec/payload-coder';
import { AgentTask } from '../domain/entities/agent-task.entity';
import { KeysetPosition, keysetPageSql, olderThan, StoredPage } from './cursor';
import { DuraflowDatabase, SqlExecutor } from './duraflow-database';
import { held } from './lifecycle/task-lifecycle';
import { TASK_COLUMNS, toAgentTask } from './row-mappers';

export interface TaskListFilter {
  /** One status, or any of several. */
  status?: string | string[];
  workflowName?: string;
  /** Only tasks of this workflow version. */
  workflowVersion?: number;
  /** Created at or after this time. */
  createdAfter?: Date;
  /** Created before this time. */
  createdBefore?: Date;
  /** Only tasks the determinism guard holds (true) or does not hold (false). */
  held?: boolean;
  /** Only the forks of this task (idx_agent_tasks_forked_from). */
  forkedFrom?: string;
  /** Only tasks holding every one of these tags (`tags @> $n`, idx_agent_tasks_tags). */
  tags?: Record<string, string>;
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
 * The reads of `agent_tasks`: a task, pages of tasks, counts, a task's children. Every write of a
 * task is a move of its lifecycle (lifecycle/task-transitions.ts).
 */
@Injectable()
export class TaskStore {
  private readonly coder: PayloadCoder;

  constructor(
    private readonly db: DuraflowDatabase,
    @Optional() coder?: PayloadCoder,
  ) {
    this.coder = coder ?? new PayloadCoder({ codec: undefined });
  }

  /** A task row as a task, its payloads decoded when read. */
  private toTask = (row: Record<string, unknown>): AgentTask => decodedTask(this.coder, toAgentTask(row));

  async findTask(id: string): Promise<AgentTask | null> {
    const { rows } = await this.db.query(`SELECT ${TASK_COLUMNS} FROM agent_tasks WHERE id = $1`, [id], 'duraflow_find_task');
    return rows.length ? this.toTask(rows[0]) : null;
  }

  /**
   * Newest first on the keyset (created_at, id): one index range scan per page, no OFFSET; cut
   * to `maxBytes` in the database, so tasks with large inputs or outputs never make a page huge.
   */
  async listTasks(filter: TaskListFilter): Promise<StoredPage<TaskListRow>> {
    const where: string[] = ['deleted_at IS NULL'];
    const values: unknown[] = [];
    if (filter.status) {
      values.push(Array.isArray(filter.status) ? filter.status : [filter.status]);
      where.push(`status = ANY($${values.length}::text[])`);
    }
    if (filter.workflowVersion !== undefined) {
      values.push(filter.workflowVersion);
      where.push(`workflow_version = $${values.length}`);
    }
    where.push(...taskFilterConditions(filter, values));
    if (filter.held !== undefined) where.push(filter.held ? held('agent_tasks') : `NOT ${held('agent_tasks')}`);
    if (filter.forkedFrom !== undefined) {
      values.push(filter.forkedFrom);
      where.push(`forked_from = $${values.length}::uuid`);
    }
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
      rows: rows.map((row) => ({ task: this.toTask(row), createdAtMicros: row.created_at_micros })),
      more: rows.length > 0 && rows[0].more,
    };
  }

  /**
   * Tasks per status. It reads every row in the range (a dashboard's overview, not a hot path):
   * on a large table, narrow it with a time range, which idx_agent_tasks_created serves.
   */
  async countTasksByStatus(filter: TaskRangeFilter): Promise<Map<string, number>> {
    const values: unknown[] = [];
    const where = ['deleted_at IS NULL', ...taskFilterConditions(filter, values)];
    const { rows } = await this.db.query<{ status: string; count: string }>(
      `SELECT status, count(*) AS count FROM agent_tasks WHERE ${where.join(' AND ')} GROUP BY status`,
      values,
    );
    return new Map(rows.map((row) => [row.status, Number(row.count)]));
  }

  /** How many tasks the determinism guard holds, with the list's workflow and time filters. */
  async countHeldTasks(filter: TaskRangeFilter): Promise<number> {
    const values: unknown[] = [];
    const where = ['deleted_at IS NULL', held('agent_tasks'), ...taskFilterConditions(filter, values)];
    const { rows } = await this.db.query<{ count: string }>(
      `SELECT count(*) AS count FROM agent_tasks WHERE ${where.join(' AND ')}`,
      values,
    );
    return Number(rows[0].count);
  }

  /** The tasks the task started with startChild / runChild, oldest first (idx_agent_tasks_parent). */
  async listChildren(parentTaskId: string): Promise<AgentTask[]> {
    const { rows } = await this.db.query(
      `SELECT ${TASK_COLUMNS} FROM agent_tasks WHERE parent_task_id = $1 ORDER BY created_at, id`,
      [parentTaskId],
      'duraflow_list_children',
    );
    return rows.map(this.toTask);
  }

  /** The child that the step `stepKey` of task `parentTaskId` started, if it started one. */
  async findChild(parentTaskId: string, stepKey: string, executor: SqlExecutor = this.db): Promise<AgentTask | null> {
    const { rows } = await executor.query(`SELECT ${TASK_COLUMNS} FROM agent_tasks WHERE parent_task_id = $1 AND parent_step_key = $2`, [
      parentTaskId,
      stepKey,
    ]);
    return rows.length ? this.toTask(rows[0]) : null;
  }
}

/** The workflow and creation-time filters of lists and counts. */
export type TaskRangeFilter = Pick<TaskListFilter, 'workflowName' | 'createdAfter' | 'createdBefore' | 'tags'>;

/** WHERE conditions for the workflow, creation-time and tags filters, their values pushed onto `values`. */
function taskFilterConditions(filter: TaskRangeFilter, values: unknown[]): string[] {
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
  if (filter.tags && Object.keys(filter.tags).length) {
    values.push(JSON.stringify(filter.tags));
    where.push(`tags @> $${values.length}::jsonb`);
  }
  return where;
}
