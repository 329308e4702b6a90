import { Client } from 'pg';
import { advisoryLockId } from '../util/advisory-lock-id';
import { clientExecutor, DuraflowDatabase, SqlExecutor, transactionOn } from './duraflow-database';

/** The advisory lock that claims the dead letter `id`, for a retry (session) or a discard (transaction). */
export function deadLetterLockId(id: string): string {
  return advisoryLockId(`duraflow:dead-letter:${id}`);
}

/**
 * A dead letter claimed by one retry: a session-level advisory lock on the entry, held by a
 * connection of its own (outside the pool) while the retry runs, so another retry or a discard
 * of the entry is turned away meanwhile. No transaction is open and no row is locked while the
 * compensation runs. The outcome is written by the same session, so it lands only while the
 * claim holds: a session that died took its lock with it and writes nothing more. A process
 * that dies mid-retry ends its session, and the entry can be retried at once.
 */
export class DeadLetterClaim {
  private constructor(private readonly client: Client) {}

  /** Claims the entry `id` (whether or not it exists); null when another retry or a discard holds it. */
  static async take(db: DuraflowDatabase, id: string): Promise<DeadLetterClaim | null> {
    const client = db.createDedicatedClient('duraflow dead-letter retry');
    // A session lost while the compensation runs fails the next statement; it must not crash the process.
    client.on('error', () => undefined);
    try {
      await client.connect();
      const { rows } = await client.query<{ claimed: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS claimed', [
        deadLetterLockId(id),
      ]);
      if (rows[0].claimed) return new DeadLetterClaim(client);
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    await client.end().catch(() => undefined);
    return null;
  }

  /** Statements on the claim's session. */
  get session(): SqlExecutor {
    return clientExecutor(this.client);
  }

  /** A transaction on the claim's session. */
  transaction<T>(work: (executor: SqlExecutor) => Promise<T>): Promise<T> {
    return transactionOn(this.client, work);
  }

  /** Ends the session, and with it the claim. Never throws. */
  async release(): Promise<void> {
    await this.client.end().catch(() => undefined);
  }
}
