/**
 * Error codes and messages of a database that went away (as opposed to a statement that is
 * wrong): the connection classes (08xxx), a server shutting down or not accepting sessions yet
 * (57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now: starting up, in
 * recovery, a standby), too many sessions, serialization and deadlock failures, and 25006
 * (read-only transaction): a write that reached a standby or a demoted primary, which is what
 * a failover looks like while the address still leads to the old server. A session that hit
 * one of these is destroyed, not returned to the pool (DuraflowDatabase), so the next one
 * goes through the address again.
 */
const TRANSIENT_SQLSTATE = /^(08|57P0[123]|53300|40001|40P01|25006$)/;
const TRANSIENT_NODE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);
const TRANSIENT_MESSAGE =
  /connection terminated|terminating connection|connection (?:ended|closed)|not queryable|timeout exceeded when trying to connect|Client has encountered a connection error/i;

/** True for errors that say "the database could not be reached", which a retry may fix. */
export function isTransientDatabaseError(error: unknown): boolean {
  if (!error || typeof error !== 'object') return false;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && (TRANSIENT_SQLSTATE.test(code) || TRANSIENT_NODE_CODES.has(code))) return true;
  return typeof message === 'string' && TRANSIENT_MESSAGE.test(message);
}
