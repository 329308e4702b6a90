import { Client } from 'pg';
import { DatabaseUnreachableError, InvalidDatabaseUrlError } from './cli.errors';

/** How long connecting may take before the server counts as unreachable. */
const CONNECT_TIMEOUT_MS = 10_000;

/** The URL to use (--url, else DATABASE_URL), checked to be a PostgreSQL URL. */
export function databaseUrlOf(url: string | undefined, env: NodeJS.ProcessEnv): string {
  const chosen = url ?? (env.DATABASE_URL || undefined);
  if (!chosen) {
    throw new InvalidDatabaseUrlError('No database given: set DATABASE_URL or pass --url postgres://user:password@host:5432/database.');
  }
  let parsed: URL;
  try {
    parsed = new URL(chosen);
  } catch {
    throw new InvalidDatabaseUrlError(`Invalid database URL "${redact(chosen)}": expected postgres://user:password@host:5432/database.`);
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') {
    throw new InvalidDatabaseUrlError(
      `Invalid database URL "${redact(chosen)}": the scheme must be postgres:// or postgresql://, not ${parsed.protocol}//.`,
    );
  }
  return chosen;
}

/** Where the URL points, without its password: for messages. */
export function describeDatabase(url: string): string {
  const parsed = new URL(url);
  return `${parsed.hostname || 'localhost'}:${parsed.port || '5432'}${parsed.pathname || '/'}`;
}

/** A connected client, or DatabaseUnreachableError saying why not in one line. */
export async function connectDatabase(url: string): Promise<Client> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  // An error after connecting (the server going away) is reported by the query that meets it.
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (error) {
    await client.end().catch(() => undefined);
    throw new DatabaseUnreachableError(`Cannot connect to PostgreSQL at ${describeDatabase(url)}: ${connectionFailure(error)}.`);
  }
  return client;
}

/** One line for a failed connection, whatever shape pg and the network gave it. */
function connectionFailure(error: unknown): string {
  const failure = error as { code?: string; message?: string; errors?: Array<{ message?: string }> };
  switch (failure.code) {
    case '28P01':
    case '28000':
      return `login refused (${failure.message})`;
    case '3D000':
      return `${failure.message}; create it, or fix the URL`;
  }
  // Node reports a refused connection to a name with several addresses as an AggregateError.
  const message = failure.message || failure.errors?.map((inner) => inner.message).join('; ') || failure.code || String(error);
  return message.replace(/\s+/g, ' ').trim();
}

function redact(url: string): string {
  return url.replace(/\/\/([^:/@]+):[^@/]*@/, '//$1:***@');
}
