import { InvalidCursorError, InvalidListOptionsError } from '../errors';

/** A keyset position: created_at in µs since the epoch (exact, unlike a JS Date) and the row id. */
export interface KeysetPosition {
  createdAtMicros: string;
  id: string;
}

export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The opaque `nextCursor` handed to callers. */
export function encodeCursor(position: KeysetPosition): string {
  return Buffer.from(`${position.createdAtMicros}:${position.id}`, 'utf8').toString('base64url');
}

/** @throws InvalidCursorError for anything `encodeCursor` did not make. */
export function decodeCursor(cursor: string): KeysetPosition {
  const match = /^(-?\d{1,19}):([0-9a-f-]{36})$/i.exec(Buffer.from(String(cursor), 'base64url').toString('utf8'));
  if (!match || !UUID_PATTERN.test(match[2])) throw new InvalidCursorError();
  return { createdAtMicros: match[1], id: match[2] };
}

/** SQL: the row's created_at as the µs text a cursor carries. */
export const CREATED_AT_MICROS = `(extract(epoch FROM created_at) * 1000000)::bigint::text`;

/** SQL: `(created_at, id)` strictly before the position in parameters $n (micros) and $n+1 (id). */
export function olderThan(n: number): string {
  return `(created_at, id) < (timestamptz 'epoch' + $${n}::bigint * interval '1 microsecond', $${n + 1}::uuid)`;
}

/** The `limit` of a list call: 1..1000, default 50. */
export function listLimit(limit: unknown): number {
  const value = limit ?? 50;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1 || value > 1000) {
    throw new InvalidListOptionsError('limit', `must be an integer from 1 to 1000, got ${String(limit)}.`);
  }
  return value;
}

/**
 * One page from `limit + 1` rows read newest first: the first `limit` items, and the cursor
 * of the last one when a further row shows there is more.
 */
export function keysetPage<R extends { createdAtMicros: string }, T extends { id: string }>(
  rows: R[],
  limit: number,
  item: (row: R) => T,
): { items: T[]; nextCursor: string | null } {
  const items = rows.slice(0, limit).map(item);
  const last = items[items.length - 1];
  return {
    items,
    nextCursor: rows.length > limit && last ? encodeCursor({ createdAtMicros: rows[limit - 1].createdAtMicros, id: last.id }) : null,
  };
}
