import { InvalidCursorError } from '../errors';

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
