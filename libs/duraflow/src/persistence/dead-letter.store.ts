import { Injectable } from '@nestjs/common';
import { DeadLetter } from '../entities/dead-letter.entity';
import { DuraflowDatabase } from './duraflow-database';

/** Every statement on `dead_letter_queue`. */
@Injectable()
export class DeadLetterStore {
  constructor(private readonly db: DuraflowDatabase) {}

  /** Newest first, as the seed's "Find failed compensations" query orders them. */
  async listDeadLetters(filter: { taskId?: string; limit: number }): Promise<DeadLetter[]> {
    const values: unknown[] = [filter.limit];
    let where = '';
    if (filter.taskId) {
      values.push(filter.taskId);
      where = 'WHERE task_id = $2';
    }
    const { rows } = await this.db.query(
      `SELECT id, task_id, step_id, error, retry_count, created_at FROM dead_letter_queue ${where}
       ORDER BY created_at DESC, id DESC LIMIT $1`,
      values,
    );
    return rows.map((row) => Object.assign(new DeadLetter(), {
      id: row.id,
      taskId: row.task_id,
      stepId: row.step_id,
      error: row.error,
      retryCount: row.retry_count,
      createdAt: row.created_at,
    }));
  }
}
