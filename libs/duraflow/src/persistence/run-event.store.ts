import { Injectable } from '@nestjs/common';
import { TASK_TALK_CHANNEL } from '../domain/duraflow.constants';
import { DuraflowDatabase } from './duraflow-database';
import { ownedTaskRow } from './lifecycle/fencing';

/** An event of a task as stored: its latest value (as the codec stored it) and when it was set. */
export interface StoredEvent {
  key: string;
  value: unknown;
  /** The position in the run's body of the `ctx.setEvent` that set it. */
  position: number;
  updatedAt: Date;
}

/**
 * The statements of `task_events`: the latest value per (task, key). A value is set only by
 * the claim that owns the running task (fenced like a checkpoint), and only over a value set
 * at an earlier position of the run's body: a replayed `ctx.setEvent` (a recovered run going
 * through its recorded path again) never brings back an older value.
 */
@Injectable()
export class RunEventStore {
  constructor(private readonly db: DuraflowDatabase) {}

  /** Sets the event while the claim owns the task: false when it no longer does. */
  async set(taskId: string, claimToken: string, key: string, valueJson: string | null, position: number): Promise<boolean> {
    const { rows } = await this.db.query<{ owned: boolean }>(
      `WITH owner AS (${ownedTaskRow('$1', '$2')}),
       set AS (
         INSERT INTO task_events (task_id, key, value, position, updated_at)
         SELECT $1, $3, $4::jsonb, $5, clock_timestamp() FROM owner
         ON CONFLICT (task_id, key) DO UPDATE
         SET value = EXCLUDED.value, position = EXCLUDED.position, updated_at = EXCLUDED.updated_at
         WHERE task_events.position < EXCLUDED.position
         RETURNING 1
       )
       SELECT EXISTS (SELECT 1 FROM owner) AS owned,
              (SELECT count(pg_notify('${TASK_TALK_CHANNEL}', $1::text)::text) FROM set) AS notified`,
      [taskId, claimToken, key, valueJson, position],
      'duraflow_event_set',
    );
    return rows[0]?.owned === true;
  }

  /** The task's status (null: no such task) and its event `key` (undefined while never set), in one snapshot. */
  async get(taskId: string, key: string): Promise<{ taskStatus: string | null; event: StoredEvent | undefined }> {
    const { rows } = await this.db.query(
      `SELECT (SELECT status FROM agent_tasks WHERE id = $1) AS status, e.key, e.value, e.position, e.updated_at
       FROM (SELECT 1) one LEFT JOIN task_events e ON e.task_id = $1 AND e.key = $2`,
      [taskId, key],
      'duraflow_event_get',
    );
    const row = rows[0];
    return { taskStatus: row.status ?? null, event: row.key == null ? undefined : storedEvent(row) };
  }

  /** Every event of the task, by key (the dashboard's list; a run sets few). */
  async list(taskId: string, limit: number): Promise<StoredEvent[]> {
    const { rows } = await this.db.query(
      `SELECT key, value, position, updated_at FROM task_events WHERE task_id = $1 ORDER BY key LIMIT $2`,
      [taskId, limit],
      'duraflow_events_list',
    );
    return rows.map(storedEvent);
  }
}

function storedEvent(row: { key: string; value: unknown; position: number; updated_at: Date }): StoredEvent {
  return { key: row.key, value: row.value, position: row.position, updatedAt: row.updated_at };
}
