import { Injectable } from '@nestjs/common';
import { PayloadCoder } from '../codec/payload-coder';
import { DuraflowDatabase } from './duraflow-database';
import { ownedTaskRow } from './lifecycle/fencing';

/** A callback as the reads return it. `status` says `expired` for an open one past its expiry. */
export interface TaskCallback {
  id: string;
  taskId: string;
  key: string;
  status: 'open' | 'completed' | 'expired';
  expiresAt: Date | null;
  createdAt: Date;
  completedAt: Date | null;
  /** What the completion carried (decoded); null while open. */
  payload: unknown;
}

/** A callback a run opens: its id is derived from the task and the key, so a replay opens the same row. */
export interface CallbackToOpen {
  id: string;
  taskId: string;
  claimToken: string;
  key: string;
  expiresAt: Date | null;
}

const COLUMNS = `id, task_id, key, created_at, completed_at, payload, expires_at,
  CASE WHEN status = 'open' AND expires_at <= duraflow_clock_timestamp() THEN 'expired' ELSE status END AS status`;

/** The rows of `task_callbacks` (a completion is a move of the lifecycle: lifecycle/complete-callback.ts). */
@Injectable()
export class CallbackStore {
  constructor(
    private readonly db: DuraflowDatabase,
    private readonly coder: PayloadCoder,
  ) {}

  /**
   * Opens the callback, fenced on the run's claim (a run that lost its task opens nothing); a
   * replay finds the row an earlier run opened and gets its expiry back, never a new one. Null:
   * the claim owns the task no more.
   */
  async open(callback: CallbackToOpen): Promise<{ expiresAt: Date | null } | null> {
    const { rows } = await this.db.query(
      `/* duraflow_open_callback */
       INSERT INTO task_callbacks (id, task_id, key, expires_at)
       SELECT $1, $2, $3, $4 WHERE EXISTS (${ownedTaskRow('$2::uuid', '$5::uuid')})
       ON CONFLICT (id) DO UPDATE SET key = task_callbacks.key
       RETURNING expires_at`,
      [callback.id, callback.taskId, callback.key, callback.expiresAt, callback.claimToken],
    );
    return rows.length ? { expiresAt: rows[0].expires_at } : null;
  }

  /** An open callback whose wait timed out is marked so (a completion would be refused anyway: its expiry passed). */
  async markExpired(callbackId: string): Promise<void> {
    await this.db.query(
      `UPDATE task_callbacks SET status = 'expired' WHERE id = $1 AND status = 'open' AND expires_at <= duraflow_clock_timestamp()`,
      [callbackId],
    );
  }

  async find(callbackId: string): Promise<TaskCallback | null> {
    const { rows } = await this.db.query(`SELECT ${COLUMNS} FROM task_callbacks WHERE id = $1`, [callbackId]);
    return rows.length ? this.toCallback(rows[0]) : null;
  }

  /** A task's callbacks, oldest first (a run opens a handful: no paging). */
  async listForTask(taskId: string): Promise<TaskCallback[]> {
    const { rows } = await this.db.query(`SELECT ${COLUMNS} FROM task_callbacks WHERE task_id = $1 ORDER BY created_at, id`, [taskId]);
    return rows.map((row) => this.toCallback(row));
  }

  private toCallback(row: Record<string, any>): TaskCallback {
    return {
      id: row.id,
      taskId: row.task_id,
      key: row.key,
      status: row.status,
      expiresAt: row.expires_at,
      createdAt: row.created_at,
      completedAt: row.completed_at,
      payload: row.payload === null ? null : this.coder.decode(row.task_id, 'callback', row.payload),
    };
  }
}
