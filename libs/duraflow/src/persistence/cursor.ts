import { DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, UUID_PATTERN } from '../domain/duraflow.constants';
import { InvalidCursorError, InvalidListOptionsError } from '../domain/errors';

/** A keyset position: created_at in µs since the epoch (exact, unlike a JS Date) and the row id. */
export interface KeysetPosition {
  createdAtMicros: string;
  id: string;
}

/** The opaque `nextCursor` handed to callers. */
export function encodeCursor(position: KeysetPosition): string {
  return Buffer.from(`${position.createdAtMicros}:${position.id}`, 'utf8').toString('base64url');
}

/**
 * The newest and oldest `created_at` a cursor may hold, in µs since the epoch: the range where
 * the µs count converts exactly to the float the page statement multiplies, which keeps it
 * well inside PostgreSQL's timestamps (years 1684 to 2255).
 */
const MAX_CURSOR_MICROS = BigInt(Number.MAX_SAFE_INTEGER);

/** @throws InvalidCursorError for anything `encodeCursor` did not make (or could not have made). */
export function decodeCursor(cursor: string): KeysetPosition {
  const match = /^(-?\d{1,19}):([0-9a-f-]{36})$/i.exec(Buffer.from(String(cursor), 'base64url').toString('utf8'));
  if (!match || !UUID_PATTERN.test(match[2])) throw new InvalidCursorError();
  const micros = BigInt(match[1]);
  if (micros > MAX_CURSOR_MICROS || micros < -MAX_CURSOR_MICROS) throw new InvalidCursorError();
  return { createdAtMicros: micros.toString(), id: match[2] };
}

/** SQL: the row's created_at as the µs text a cursor carries. */
const CREATED_AT_MICROS = `(extract(epoch FROM created_at) * 1000000)::bigint::text`;

/** SQL: `(created_at, id)` strictly before the position in parameters $n (micros) and $n+1 (id). */
export function olderThan(n: number): string {
  return `(created_at, id) < (timestamptz 'epoch' + $${n}::bigint * interval '1 microsecond', $${n + 1}::uuid)`;
}

/** The `limit` of a list call: 1..MAX_LIST_LIMIT, default DEFAULT_LIST_LIMIT. */
export function listLimit(limit: unknown): number {
  const value = limit ?? DEFAULT_LIST_LIMIT;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1 || value > MAX_LIST_LIMIT) {
    throw new InvalidListOptionsError('limit', `must be an integer from 1 to ${MAX_LIST_LIMIT}, got ${String(limit)}.`);
  }
  return value;
}

/**
 * SQL: one page of `table` newest first on the keyset (created_at, id), at most `limit` rows
 * and at most `maxBytes` bytes of them (each row measured as its text), though always its
 * first row; `more` on every row says whether rows are left after it. Rows are measured and
 * cut in the database: one that does not fit never reaches this process. `where` may use the
 * table's columns unqualified; `limit` and `maxBytes` are parameters ($n).
 */
export function keysetPageSql(table: string, columns: string, where: string[], limit: string, maxBytes: string): string {
  return `WITH page AS (
       SELECT id, created_at, octet_length(${table}::text) AS bytes FROM ${table}
       ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
       ORDER BY created_at DESC, id DESC LIMIT ${limit} + 1
     ), sized AS (
       SELECT id, row_number() OVER w AS n, sum(bytes) OVER w AS bytes_through
       FROM page WINDOW w AS (ORDER BY created_at DESC, id DESC)
     ), kept AS (
       SELECT id, n FROM sized WHERE n <= ${limit} AND (n = 1 OR bytes_through <= ${maxBytes})
     )
     SELECT ${columns}, ${CREATED_AT_MICROS} AS created_at_micros,
            (SELECT count(*) FROM page) > (SELECT count(*) FROM kept) AS more
     FROM ${table} JOIN kept USING (id)
     ORDER BY kept.n`;
}

/** A page as the store read it: its rows (with their keyset position) and whether more follow. */
export interface StoredPage<R extends { createdAtMicros: string }> {
  rows: R[];
  more: boolean;
}

/** The page handed to callers: its items, and the cursor of the last one when more follow. */
export function keysetPage<R extends { createdAtMicros: string }, T extends { id: string }>(
  page: StoredPage<R>,
  item: (row: R) => T,
): { items: T[]; nextCursor: string | null } {
  const items = page.rows.map(item);
  const last = page.rows.length ? page.rows[page.rows.length - 1] : undefined;
  return {
    items,
    nextCursor: page.more && last ? encodeCursor({ createdAtMicros: last.createdAtMicros, id: items[items.length - 1].id }) : null,
  };
}
