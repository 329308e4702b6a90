import { Injectable, Optional } from '@nestjs/common';
import { decodeError, decodeLazily, decodeStepOutput } from '../codec/decoded-rows';
import { PayloadCoder } from '../codec/payload-coder';
import { DeadLetter } from '../domain/entities/dead-letter.entity';
import { KeysetPosition, keysetPageSql, olderThan, StoredPage } from './cursor';
import { DeadLetterClaim, deadLetterLockId } from './dead-letter-claim';
import { DuraflowDatabase, SqlExecutor } from './duraflow-database';
import { ownedTaskRow } from './lifecycle/fencing';
import { DEAD_LETTER_COLUMNS, toDeadLetter } from './row-mappers';
import { ClaimFence } from './step.store';
import { DeadLetterForRetry, readDeadLetterForRetry } from './sql/read-dead-letter-for-retry';

export interface DeadLetterRow {
  deadLetter: DeadLetter;
  createdAtMicros: string;
}

/**
 * The statements that write `dead_letter_queue` (a rollback's entry, fenced on its claim; a
 * failed retry's count) and read it, and the claim a retry or a discard takes on an entry.
 * Resolving an entry is a move of its task's lifecycle (lifecycle/resolve-dead-letter.ts); a
 * retry reads the entry with its step and task (sql/read-dead-letter-for-retry.ts).
 */
@Injectable()
export class DeadLetterStore {
  constructor(
    private readonly db: DuraflowDatabase,
    @Optional() private readonly coder?: PayloadCoder,
  ) {}

  /** With a codec, the entry's error (a compensation's failure: user data) decoded when read. */
  private toEntry = (row: Record<string, unknown>): DeadLetter => {
    const deadLetter = toDeadLetter(row);
    const coder = this.coder;
    if (coder?.encoding) decodeLazily(deadLetter, 'error', (stored) => decodeError(coder, deadLetter.taskId, stored));
    return deadLetter;
  };

  private encodeError(taskId: string, errorJson: string): string {
    return this.coder ? this.coder.encodeJson(taskId, 'error', errorJson) : errorJson;
  }

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
      rows: rows.map((row) => ({ deadLetter: this.toEntry(row), createdAtMicros: row.created_at_micros })),
      more: rows.length > 0 && rows[0].more,
    };
  }

  /**
   * The compensation of the step `stepId` of task `taskId` failed for good: its dead letter,
   * fenced on the claim of the rollback that ran it (`fence`: the task's own, or its parent's).
   * One open dead letter per step (idx_dlq_step_id); writing again only refreshes its error.
   */
  async insertDeadLetter(taskId: string, stepId: string, errorJson: string, fence: ClaimFence): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `INSERT INTO dead_letter_queue (task_id, step_id, error)
       SELECT $1, $2, $3::jsonb
       FROM (${ownedTaskRow('$4', '$5')}) owner
       ON CONFLICT (step_id) DO UPDATE SET error = EXCLUDED.error
       RETURNING id`,
      [taskId, stepId, this.encodeError(taskId, errorJson), fence.taskId, fence.claimToken],
      'duraflow_dead_letter',
    );
    return rowCount > 0;
  }

  /**
   * The dead letters still open on the child that the step `stepKey` of `parentTaskId` started
   * (its own steps', which hold its children's in turn): a parent's dead letter for that step
   * resolves once there are none. Null when the step started no child.
   */
  async openDeadLettersOfChild(
    executor: SqlExecutor,
    parentTaskId: string,
    stepKey: string,
  ): Promise<{ childTaskId: string; open: number } | null> {
    const { rows } = await executor.query(
      `SELECT c.id, (SELECT count(*)::int FROM dead_letter_queue d WHERE d.task_id = c.id) AS open
       FROM agent_tasks c WHERE c.parent_task_id = $1 AND c.parent_step_key = $2`,
      [parentTaskId, stepKey],
    );
    return rows.length ? { childTaskId: rows[0].id, open: rows[0].open } : null;
  }

  /**
   * Claims the entry for a retry, on a session of its own (DeadLetterClaim, confirmed before an
   * attempt once older than `confirmAfterMs`); null when a retry or a discard holds it.
   */
  claimForRetry(id: string, confirmAfterMs: number): Promise<DeadLetterClaim | null> {
    return DeadLetterClaim.take(this.db, id, confirmAfterMs);
  }

  /** Claims the entry for the rest of the caller's transaction (a discard); false when a retry or a discard holds it. */
  async claimInTransaction(tx: SqlExecutor, id: string): Promise<boolean> {
    const { rows } = await tx.query<{ claimed: boolean }>(`SELECT pg_try_advisory_xact_lock($1::bigint) AS claimed`, [
      deadLetterLockId(id),
    ]);
    return rows[0].claimed;
  }

  /** The entry with its step and task (sql/read-dead-letter-for-retry.ts); null when there is none. */
  async findForRetry(executor: SqlExecutor, id: string): Promise<DeadLetterForRetry | null> {
    const found = await readDeadLetterForRetry(executor, id);
    const coder = this.coder;
    if (!found || !coder?.encoding) return found;
    const { taskId } = found.deadLetter;
    decodeLazily(found.deadLetter, 'error', (stored) => decodeError(coder, taskId, stored));
    decodeLazily(found, 'output', (stored) => decodeStepOutput(coder, taskId, found.stepKind, found.stepInput, stored));
    return found;
  }

  /** A retry failed again: one more retry counted, and the latest error kept. */
  async recordRetryFailure(executor: SqlExecutor, id: string, errorJson: string, taskId?: string): Promise<DeadLetter> {
    if (taskId) errorJson = this.encodeError(taskId, errorJson);
    const { rows } = await executor.query(
      `UPDATE dead_letter_queue SET retry_count = COALESCE(retry_count, 0) + 1, error = $2::jsonb
       WHERE id = $1 RETURNING ${DEAD_LETTER_COLUMNS}`,
      [id, errorJson],
    );
    return this.toEntry(rows[0]);
  }
}
