import { BulkSelection } from '../../domain/bulk-operations';
import { DuraflowDatabase, SqlExecutor } from '../duraflow-database';
import { retryable } from './retry-tasks';
import { held } from './task-lifecycle';

/**
 * The batches of the bulk moves (cancelMany, resumeMany, retryMany): which tasks a filter selects,
 * and one batch of them locked and moved in one short transaction. A batch is a keyset page over
 * (created_at, id), the order of idx_agent_tasks_created (idx_agent_tasks_status_created with a
 * status): a task's place in it never changes, so a walk meets each task once whatever its status
 * becomes meanwhile. Its rows are locked `FOR UPDATE SKIP LOCKED`: a row a worker holds at that
 * moment (a claim, a heartbeat, a checkpoint) is passed over, never waited for, and reported as
 * not locked so the caller can come back to it; the transaction ends with the batch, so at most
 * one batch is ever locked.
 */

/** The bulk moves, by the lifecycle move each applies to a batch. */
export type BulkMoveKind = 'cancel' | 'resume' | 'retry';

/**
 * What a bulk move applies to beyond the statuses of its selection. cancel: not rolling back (a
 * task already undoing its steps for a failure or a cancel is left to end as it is). resume: held.
 * retry: the retry move's own condition (retry-tasks.ts).
 */
function appliesTo(kind: BulkMoveKind, t: string): string {
  if (kind === 'cancel') return `${t}.rollback_reason IS NULL`;
  if (kind === 'resume') return held(t);
  return retryable(t);
}

/** The selection's conditions on `t`, their values pushed onto `values`. */
function selected(kind: BulkMoveKind, selection: BulkSelection, values: unknown[], t = 't'): string {
  const where = [`${t}.deleted_at IS NULL`, appliesTo(kind, t)];
  const push = (value: unknown) => `$${values.push(value)}`;
  where.push(`${t}.status = ANY(${push(selection.statuses)}::varchar[])`);
  if (selection.workflow !== undefined) where.push(`${t}.workflow_name = ${push(selection.workflow)}`);
  if (selection.version !== undefined) where.push(`coalesce(${t}.workflow_version, 1) = ${push(selection.version)}`);
  if (selection.createdAfter) where.push(`${t}.created_at >= ${push(selection.createdAfter)}`);
  if (selection.createdBefore) where.push(`${t}.created_at < ${push(selection.createdBefore)}`);
  if (selection.tags && Object.keys(selection.tags).length) where.push(`${t}.tags @> ${push(JSON.stringify(selection.tags))}::jsonb`);
  return where.join(' AND ');
}

/** A place in the walk: the (created_at, id) of the last task of the previous batch, created_at as PostgreSQL's text. */
export interface BulkPosition {
  createdAt: string;
  id: string;
}

/** One batch: the page after `after` (null: the first), or, to come back to tasks passed over, exactly `ids`. */
export type BulkBatch = { after: BulkPosition | null; size: number } | { ids: string[] };

/** A task of a batch: selected when the batch was read; `locked` when this batch locked (and moved) it. */
export interface BulkCandidate extends BulkPosition {
  locked: boolean;
}

/**
 * Reads the batch and locks those of its rows no one else holds, in id order (the lock order of
 * fencing.ts), re-checking the selection on each row's newest version; inside the caller's transaction.
 */
export async function lockBulkBatch(
  tx: SqlExecutor,
  kind: BulkMoveKind,
  selection: BulkSelection,
  batch: BulkBatch,
): Promise<BulkCandidate[]> {
  const values: unknown[] = [];
  const where = selected(kind, selection, values);
  let page: string;
  if ('ids' in batch) {
    page = `t.id = ANY($${values.push(batch.ids)}::uuid[]) ORDER BY t.created_at, t.id`;
  } else {
    const after = batch.after
      ? `AND (t.created_at, t.id) > ($${values.push(batch.after.createdAt)}::timestamptz, $${values.push(batch.after.id)}::uuid)`
      : '';
    page = `true ${after} ORDER BY t.created_at, t.id LIMIT $${values.push(batch.size)}`;
  }
  const { rows } = await tx.query<{ id: string; created_at: string; locked: boolean }>(
    `WITH candidates AS MATERIALIZED (
       SELECT t.id, t.created_at FROM agent_tasks t WHERE ${where} AND ${page}
     ), locked AS MATERIALIZED (
       SELECT t.id FROM agent_tasks t WHERE t.id IN (SELECT id FROM candidates) AND ${where}
       ORDER BY t.id FOR UPDATE OF t SKIP LOCKED
     )
     SELECT c.id, c.created_at::text AS created_at, l.id IS NOT NULL AS locked
     FROM candidates c LEFT JOIN locked l ON l.id = c.id ORDER BY c.created_at, c.id`,
    values,
  );
  return rows.map((row) => ({ id: row.id, createdAt: row.created_at, locked: row.locked }));
}

/** A batch locked and moved in one transaction: `move` gets the ids locked (never empty) on the same transaction. */
export function moveBulkBatch<M>(
  db: DuraflowDatabase,
  kind: BulkMoveKind,
  selection: BulkSelection,
  batch: BulkBatch,
  move: (tx: SqlExecutor, ids: string[]) => Promise<M>,
): Promise<{ candidates: BulkCandidate[]; moved: M | null }> {
  return db.transaction(async (tx) => {
    const candidates = await lockBulkBatch(tx, kind, selection, batch);
    const ids = candidates.filter((candidate) => candidate.locked).map((candidate) => candidate.id);
    return { candidates, moved: ids.length ? await move(tx, ids) : null };
  });
}

/** How many tasks the selection matches now, counting at most `limit` (a dry run). */
export async function countBulkSelection(db: SqlExecutor, kind: BulkMoveKind, selection: BulkSelection, limit: number): Promise<number> {
  const values: unknown[] = [];
  const where = selected(kind, selection, values);
  const cap = Number.isFinite(limit) ? `LIMIT $${values.push(limit)}` : '';
  const { rows } = await db.query<{ n: string }>(
    `SELECT count(*) AS n FROM (SELECT 1 FROM agent_tasks t WHERE ${where} ${cap}) matching`,
    values,
  );
  return Number(rows[0].n);
}

/** The workflow names of the tasks the selection matches now (what a cancel with compensation must be able to undo). */
export async function bulkSelectionWorkflows(db: SqlExecutor, kind: BulkMoveKind, selection: BulkSelection): Promise<string[]> {
  const values: unknown[] = [];
  const where = selected(kind, selection, values);
  const { rows } = await db.query<{ workflow_name: string }>(`SELECT DISTINCT t.workflow_name FROM agent_tasks t WHERE ${where}`, values);
  return rows.map((row) => row.workflow_name);
}
