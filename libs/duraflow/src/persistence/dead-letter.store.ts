import { Injectable } from '@nestjs/common';
import { DeadLetter } from '../entities/dead-letter.entity';
import { KeysetPosition, keysetPageSql, olderThan, StoredPage } from './cursor';
import { DuraflowDatabase, SqlExecutor } from './duraflow-database';
import { ownedTaskRow } from './fencing';
import { resolveDeadLetter } from './sql/resolve-dead-letter';

export interface DeadLetterRow {
  deadLetter: DeadLetter;
  createdAtMicros: string;
}

/** A dead letter with what a retry needs: its step's saved output and compensation name. */
export interface DeadLetterForRetry {
  deadLetter: DeadLetter;
  /** Null when the step (and so its task) no longer exists: an orphaned entry. */
  stepKey: string | null;
  output: unknown;
  outputUndefined: boolean;
  compensationFn: string | null;
  workflowName: string | null;
  taskStatus: string | null;
}

const DEAD_LETTER_COLUMNS = `id, task_id, step_id, error, retry_count, created_at`;

function toDeadLetter(row: Record<string, any>): DeadLetter {
  return Object.assign(new DeadLetter(), {
    id: row.id,
    taskId: row.task_id,
    stepId: row.step_id,
    error: row.error,
    retryCount: row.retry_count,
    createdAt: row.created_at,
  });
}

/**
 * The statements that write `dead_letter_queue` (a rollback's entry, fenced on its claim; a
 * failed retry's count) and read it. Resolving an entry also writes `step_runs` and
 * `agent_tasks` in one transaction: sql/resolve-dead-letter.ts, reached through here.
 */
@Injectable()
export class DeadLetterStore {
  constructor(private readonly db: DuraflowDatabase) {}

  /** Newest first on the keyset (created_at, id); pages cut to `maxBytes`. */
  async listDeadLetters(filter: { taskId?: string; limit: number; maxBytes: number; after?: KeysetPosition }): Promise<StoredPage<DeadLetterRow>> {
    const values: unknown[] = [];
    const where: string[] = [];
    if (filter.taskId) {
      values.push(filter.taskId);
      where.push(`task_id = $${values.length}`);
    }
    if (filter.after) {
      values.push(filter.after.createdAtMicros, filter.after.id);
      where.push(olderThan(values.length - 1));
    }
    values.push(filter.limit, filter.maxBytes);
    const { rows } = await this.db.query(
      keysetPageSql('dead_letter_queue', DEAD_LETTER_COLUMNS, where, `$${values.length - 1}`, `$${values.length}`),
      values,
    );
    return {
      rows: rows.map((row) => ({ deadLetter: toDeadLetter(row), createdAtMicros: row.created_at_micros })),
      more: rows.length > 0 && rows[0].more,
    };
  }

  /**
   * Fenced on the rollback's claim: the compensation of `stepId` failed for good. One open
   * dead letter per step (idx_dlq_step_id); writing again only refreshes its error.
   */
  async insertDeadLetter(taskId: string, claimToken: string, stepId: string, errorJson: string): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `INSERT INTO dead_letter_queue (task_id, step_id, error)
       SELECT $1, $3, $4::jsonb
       FROM (${ownedTaskRow('$1', '$2')}) owner
       ON CONFLICT (step_id) DO UPDATE SET error = EXCLUDED.error
       RETURNING id`,
      [taskId, claimToken, stepId, errorJson],
      'duraflow_dead_letter',
    );
    return rowCount > 0;
  }

  /**
   * Locks one dead letter for a retry (inside the caller's transaction) and reads what the
   * retry needs. `busy` when another retry holds it.
   */
  async lockForRetry(tx: SqlExecutor, id: string): Promise<DeadLetterForRetry | 'busy' | null> {
    let rows: Record<string, any>[];
    try {
      ({ rows } = await tx.query(
        `SELECT d.id, d.task_id, d.step_id, d.error, d.retry_count, d.created_at,
                s.step_key, s.output, s.output IS NULL AS output_undefined, s.compensation_fn,
                t.workflow_name, t.status AS task_status
         FROM dead_letter_queue d
         LEFT JOIN step_runs s ON s.id = d.step_id
         LEFT JOIN agent_tasks t ON t.id = d.task_id
         WHERE d.id = $1
         FOR UPDATE OF d NOWAIT`,
        [id],
      ));
    } catch (error) {
      if ((error as { code?: string }).code === '55P03') return 'busy'; // lock_not_available
      throw error;
    }
    if (!rows.length) return null;
    const row = rows[0];
    return {
      deadLetter: toDeadLetter(row),
      stepKey: row.step_key,
      output: row.output,
      outputUndefined: row.output_undefined,
      compensationFn: row.compensation_fn,
      workflowName: row.workflow_name,
      taskStatus: row.task_status,
    };
  }

  /** The dead letter is resolved, inside the caller's transaction (sql/resolve-dead-letter.ts). Returns the task's status. */
  resolve(tx: SqlExecutor, deadLetter: DeadLetter, compensated: boolean): Promise<string | null> {
    return resolveDeadLetter(tx, deadLetter, compensated);
  }

  /** A retry failed again: one more retry counted, and the latest error kept. */
  async recordRetryFailure(tx: SqlExecutor, id: string, errorJson: string): Promise<DeadLetter> {
    const { rows } = await tx.query(
      `UPDATE dead_letter_queue SET retry_count = COALESCE(retry_count, 0) + 1, error = $2::jsonb
       WHERE id = $1 RETURNING ${DEAD_LETTER_COLUMNS}`,
      [id, errorJson],
    );
    return toDeadLetter(rows[0]);
  }
}
