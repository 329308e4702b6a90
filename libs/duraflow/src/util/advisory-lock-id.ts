import { createHash } from 'node:crypto';

/** `pg_try_advisory_lock` takes a bigint: the first 8 bytes of the key's SHA-256, as text. */
export function advisoryLockId(key: string): string {
  return createHash('sha256').update(key).digest().readBigInt64BE(0).toString();
}
