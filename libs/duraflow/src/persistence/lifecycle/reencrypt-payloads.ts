import { PayloadField } from '../../domain/payload-codec';
import { PATCH_MARKER_PREFIX } from '../../domain/reserved-keys';
import { SqlExecutor } from '../duraflow-database';
import { textLiteral } from '../literals';
import { DROPPED_LINES_MESSAGE } from '../run-log.store';

/**
 * `duraflow reencrypt`'s statements: each payload column walked on its key in batches, each
 * batch one short transaction over the rows it locked (FOR UPDATE SKIP LOCKED: a row a worker
 * holds now is passed over, and found by the next run), each row read, recoded in Node by the
 * caller (decoded with any configured key, encoded with the current one) and written back. Not a
 * move: no status, claim or time of a task changes. The rows it picks are those whose value is
 * not sealed under the current key (plaintext, or another key), so a second run finds none.
 */
export interface PayloadColumn {
  table: string;
  /** The primary key's columns, in its order (the walk's keyset). */
  key: string[];
  column: string;
  /** The column holding the task id the value is bound to. */
  taskColumn: string;
  field: PayloadField;
  /** More of the row the recode needs (a step's kind and input: where its output came from). */
  extra?: string[];
  /** Rows the walk leaves alone (SQL over the row, e.g. a patch marker read by SQL). */
  skip?: string;
}

/** Every payload column of Duraflow's tables (those of tables this database lacks are passed over). */
export const PAYLOAD_COLUMNS: PayloadColumn[] = [
  { table: 'agent_tasks', key: ['id'], column: 'input', taskColumn: 'id', field: 'input' },
  { table: 'agent_tasks', key: ['id'], column: 'output', taskColumn: 'id', field: 'output' },
  { table: 'agent_tasks', key: ['id'], column: 'error', taskColumn: 'id', field: 'error' },
  {
    table: 'step_runs',
    key: ['id'],
    column: 'output',
    taskColumn: 'task_id',
    field: 'step_output',
    extra: ['kind', 'input'],
    skip: `step_key LIKE '${PATCH_MARKER_PREFIX}%'`,
  },
  { table: 'step_runs', key: ['id'], column: 'error', taskColumn: 'task_id', field: 'error' },
  { table: 'task_signals', key: ['id'], column: 'payload', taskColumn: 'task_id', field: 'signal' },
  // The row counting dropped lines holds a count SQL adds to (run-log.store.ts), nothing of the run's.
  {
    table: 'task_logs',
    key: ['task_id', 'seq'],
    column: 'metadata',
    taskColumn: 'task_id',
    field: 'log',
    skip: `message = ${textLiteral(DROPPED_LINES_MESSAGE)} AND metadata ? 'dropped'`,
  },
  { table: 'dead_letter_queue', key: ['id'], column: 'error', taskColumn: 'task_id', field: 'error' },
  { table: 'task_events', key: ['task_id', 'key'], column: 'value', taskColumn: 'task_id', field: 'event' },
  { table: 'task_stream_chunks', key: ['task_id', 'key', 'seq'], column: 'chunk', taskColumn: 'task_id', field: 'stream' },
  { table: 'task_callbacks', key: ['id'], column: 'payload', taskColumn: 'task_id', field: 'callback' },
  { table: 'duraflow_published_events', key: ['id'], column: 'payload', taskColumn: 'id', field: 'publish' },
];

/** A row of a batch: its key's values, its task, its stored value and the extra columns. */
export interface StoredPayload {
  key: unknown[];
  taskId: string;
  stored: unknown;
  extra: Record<string, unknown>;
}

/** SQL: the value of `column` is sealed under key `$n` (an error's sealed part is under `$encoded`). */
function sealedUnder(column: string, keyParam: string): string {
  const sealed = `COALESCE(${column}->'$encoded', ${column})`;
  return `(jsonb_typeof(${column}) = 'object' AND ${sealed}->>'$enc' IS NOT NULL AND ${sealed}->>'k' = ${keyParam})`;
}

export async function tableExists(db: SqlExecutor, table: string): Promise<boolean> {
  const { rows } = await db.query(`SELECT to_regclass($1) IS NOT NULL AS found`, [table]);
  return rows[0].found === true;
}

/**
 * One batch of `target` in the transaction `tx`: the rows after `after` (the key's values; null
 * from the start) not sealed under `currentKeyId`, at most `limit`, locked; `recode` gives each
 * one's new value as JSON text (undefined: leave it, it could not be read). Returns how many
 * were read, rewritten and left, and the key of the last row read (null when the walk is over).
 */
export async function reencryptBatch(
  tx: SqlExecutor,
  target: PayloadColumn,
  after: unknown[] | null,
  limit: number,
  currentKeyId: string,
  recode: (row: StoredPayload) => string | undefined,
): Promise<{ read: number; rewritten: number; left: number; last: unknown[] | null }> {
  const keys = target.key.join(', ');
  const afterParams = target.key.map((_, index) => `$${index + 3}`).join(', ');
  const extra = (target.extra ?? []).map((column) => `, ${column}`).join('');
  const { rows } = await tx.query(
    `SELECT ${keys}, ${target.taskColumn} AS duraflow_task_id, ${target.column} AS duraflow_value${extra}
     FROM ${target.table}
     WHERE ${target.column} IS NOT NULL AND NOT ${sealedUnder(target.column, '$1')}
       ${target.skip ? `AND NOT (${target.skip})` : ''}
       ${after ? `AND (${keys}) > (${afterParams})` : ''}
     ORDER BY ${keys} LIMIT $2
     FOR UPDATE SKIP LOCKED`,
    [currentKeyId, limit, ...(after ?? [])],
  );
  let rewritten = 0;
  for (const row of rows) {
    const key = target.key.map((column) => row[column]);
    const value = recode({ key, taskId: row.duraflow_task_id, stored: row.duraflow_value, extra: row });
    if (value === undefined) continue;
    const where = target.key.map((column, index) => `${column} = $${index + 2}`).join(' AND ');
    await tx.query(`UPDATE ${target.table} SET ${target.column} = $1::jsonb WHERE ${where}`, [value, ...key]);
    rewritten++;
  }
  const last = rows.length ? target.key.map((column) => rows[rows.length - 1][column]) : null;
  return { read: rows.length, rewritten, left: rows.length - rewritten, last: rows.length < limit ? null : last };
}

/**
 * The tasks whose history holds a retried entry's error not sealed under `currentKeyId`, after
 * `after`, locked; `recode` rewrites the whole history (JSON text). Returns as reencryptBatch.
 */
export async function reencryptHistoryBatch(
  tx: SqlExecutor,
  after: string | null,
  limit: number,
  currentKeyId: string,
  recode: (taskId: string, history: unknown[]) => string | undefined,
): Promise<{ read: number; rewritten: number; left: number; last: string | null }> {
  const { rows } = await tx.query(
    `SELECT id, history FROM agent_tasks
     WHERE jsonb_typeof(history) = 'array' AND ($3::uuid IS NULL OR id > $3::uuid)
       AND EXISTS (SELECT 1 FROM jsonb_array_elements(history) e(entry)
                   WHERE e.entry->>'kind' = 'retried' AND jsonb_typeof(e.entry->'error') = 'object'
                     AND NOT ${sealedUnder(`(e.entry->'error')`, '$1')})
     ORDER BY id LIMIT $2
     FOR UPDATE SKIP LOCKED`,
    [currentKeyId, limit, after],
  );
  let rewritten = 0;
  for (const row of rows) {
    const value = recode(row.id, row.history);
    if (value === undefined) continue;
    await tx.query(`UPDATE agent_tasks SET history = $2::jsonb WHERE id = $1`, [row.id, value]);
    rewritten++;
  }
  return { read: rows.length, rewritten, left: rows.length - rewritten, last: rows.length < limit ? null : rows[rows.length - 1].id };
}
