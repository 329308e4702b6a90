import { escapeLiteral } from 'pg';

/**
 * Values written into a statement as SQL literals, for the statements that go over the simple
 * query protocol (several statements in one round trip, which carries no parameters). Each
 * string stays one literal whatever it holds: `escapeLiteral` doubles quotes and backslashes.
 */

export function textLiteral(value: string): string {
  return escapeLiteral(value);
}

/** A `varchar[]` of the strings (an empty array is typed too). */
export function varcharArrayLiteral(values: string[]): string {
  return `ARRAY[${values.map(textLiteral).join(', ')}]::varchar[]`;
}

/** A whole number >= 0; anything else is a bug of the caller, not a value to write. */
export function countLiteral(value: number): string {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`Expected a whole number >= 0, got ${value}`);
  return String(value);
}
