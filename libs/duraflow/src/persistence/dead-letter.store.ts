import { Injectable } from '@nestjs/common';
import { DeadLetter } from '../domain/entities/dead-letter.entity';
import { KeysetPosition, keysetPageSql, olderThan, StoredPage } from './cursor';
import { DeadLetterClaim, deadLetterLockId } from './dead-letter-claim';
import { DuraflowDatabase, SqlExecutor } from './duraflow-database';
import { ownedTaskRow } from './fencing';
import { DEAD_LETTER_COLUMNS, toDeadLetter } from './row-mappers';
import { DeadLetterForRetry, readDeadLetterForRetry } from './sql/read-dead-letter-for-retry';
import { resolveDeadLetter } from './sql/resolve-dead-letter';

export interface DeadLetterRow {
  deadLetter: DeadLetter;
  createdAtMicros: string;
}

/**
 * The statements that write `dead_letter_queue` (a rollback's entry, fenced on its claim; a
 * failed retry's count) and read it, and the claim a retry or a discard takes on an entry.
 * Resolving an entry also writes `step_runs` and `agent_tasks` in one transaction, and a retry
 * reads the entry with its step and task: sql/resolve-dead-letter.ts and
 * sql/read-dead-letter-for-retry.ts, reached through here.
 */
@Injectable()
export class DeadLetterStore {
  constructor(private readonly db: DuraflowDatabase) {}

  /** Newest first on the keyset (created_at, id); pages cut to `maxBytes`. */
  async listDeadLetters(filter: {
    taskId?: string;
    limit: number;
    maxBytes: number;
    after?: KeysetPosition;
  }): Promise<StoredPage<DeadLetterRow>> {
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

  /** Claims the entry for a retry, on a session of its own (DeadLetterClaim); null when a retry or a discard holds it. */
  claimForRetry(id: string): Promise<DeadLetterClaim | null> {
    return DeadLetterClaim.take(this.db, id);
  }

  /** Claims the entry for the rest of the caller's transaction (a discard); false when a retry or a discard holds it. */
  async claimInTransaction(tx: SqlExecutor, id: string): Promise<boolean> {
    const { rows } = await tx.query<{ claimed: boolean }>(`SELECT pg_try_advisory_xact_lock($1::bigint) AS claimed`, [
      deadLetterLockId(id),
    ]);
    return rows[0].claimed;
  }

  /** The entry with its step and task (sql/read-dead-letter-for-retry.ts); null when there is none. */
  findForRetry(executor: SqlExecutor, id: string): Promise<DeadLetterForRetry | null> {
    return readDeadLetterForRetry(executor, id);
  }

  /** The dead letter is resolved, inside the caller's transaction (sql/resolve-dead-letter.ts). Returns the task's status. */
  resolve(tx: SqlExecutor, deadLetter: DeadLetter, compensated: boolean): Promise<string | null> {
    return resolveDeadLetter(tx, deadLetter, compensated);
  }

  /** A retry failed again: one more retry counted, and the latest error kept. */
  async recordRetryFailure(executor: SqlExecutor, id: string, errorJson: string): Promise<DeadLetter> {
    const { rows } = await executor.query(
      `UPDATE dead_letter_queue SET retry_count = COALESCE(retry_count, 0) + 1, error = $2::jsonb
       WHERE id = $1 RETURNING ${DEAD_LETTER_COLUMNS}`,
      [id, errorJson],
    );
    return toDeadLetter(rows[0]);
  }
}
