import { Injectable } from '@nestjs/common';
import { DuraflowDatabase } from './duraflow-database';

/** A signal as `getSignals` lists it. */
export interface TaskSignal {
  id: string;
  name: string;
  payload: unknown;
  createdAt: Date;
  /** When a wait took it; null while it is kept for a wait to come. */
  consumedAt: Date | null;
  /** The key of the wait that took it. */
  consumedByStep: string | null;
}

/** The reads of `task_signals` (a signal is kept and taken by moves of the lifecycle: lifecycle/send-signal.ts, settle-wait.ts). */
@Injectable()
export class SignalStore {
  constructor(private readonly db: DuraflowDatabase) {}

  /** The signals sent to a task, in the order they were sent. */
  async listSignals(taskId: string): Promise<TaskSignal[]> {
    const { rows } = await this.db.query(
      `SELECT id, name, payload, created_at, consumed_at, consumed_by_step FROM task_signals WHERE task_id = $1 ORDER BY id`,
      [taskId],
    );
    return rows.map((row) => ({
      id: String(row.id),
      name: row.name,
      payload: row.payload,
      createdAt: row.created_at,
      consumedAt: row.consumed_at,
      consumedByStep: row.consumed_by_step,
    }));
  }
}
