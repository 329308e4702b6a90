import { performance } from 'node:perf_hooks';
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
 *
 * Behind pgbouncer in transaction mode without a direct `listenUrl`, a session lock would stay
 * on whichever server connection ran it; there the claim is a transaction-level lock instead,
 * in a transaction held open (pinning one server connection) until `release()` commits it: the
 * outcome is written in it, under a savepoint, and lands with the commit, only while the claim holds.
 */
export class DeadLetterClaim {
  private readonly controller = new AbortController();
  private confirmedAt = performance.now();

  private constructor(
    private readonly client: Client,
    private readonly inTransaction: boolean,
    private readonly confirmAfterMs: number,
  ) {
    // A session lost while the compensation runs ends the claim: the signal aborts, and its
    // next statement fails instead of crashing the process.
    client.on('error', () => this.controller.abort(new Error("the dead letter's claim was lost (its session ended)")));
  }

  /** Aborts once the claim is known lost (its session ended). */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /**
   * Before an attempt of the compensation: a claim older than `confirmAfterMs` checks that its
   * session (and so its lock) is still there; a lost one aborts `signal`. Never rejects.
   */
  async confirmIfOld(): Promise<void> {
    if (this.signal.aborted || performance.now() - this.confirmedAt < this.confirmAfterMs) return;
    const sentAt = performance.now();
    try {
      await this.client.query('SELECT 1');
      this.confirmedAt = sentAt;
    } catch (error) {
      this.controller.abort(error);
    }
  }

  /** Claims the entry `id` (whether or not it exists); null when another retry or a discard holds it. */
  static async take(db: DuraflowDatabase, id: string, confirmAfterMs: number): Promise<DeadLetterClaim | null> {
    const client = db.createDedicatedClient('duraflow dead-letter retry');
    const inTransaction = !db.sessionsDirect;
    const claim = new DeadLetterClaim(client, inTransaction, confirmAfterMs);
    try {
      await client.connect();
      if (inTransaction) await client.query('BEGIN');
      const { rows } = await client.query<{ claimed: boolean }>(
        `SELECT ${inTransaction ? 'pg_try_advisory_xact_lock' : 'pg_try_advisory_lock'}($1::bigint) AS claimed`,
        [deadLetterLockId(id)],
      );
      if (rows[0].claimed) return claim;
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    await client.end().catch(() => undefined);
    return null;
  }

  /** Statements on the claim's session (inside its transaction, when it is one). */
  get session(): SqlExecutor {
    return clientExecutor(this.client, !this.inTransaction);
  }

  /** A transaction on the claim's session (a savepoint in the claim's own transaction, when it is one). */
  async transaction<T>(work: (executor: SqlExecutor) => Promise<T>): Promise<T> {
    if (!this.inTransaction) return transactionOn(this.client, work);
    await this.client.query('SAVEPOINT duraflow_dead_letter_retry');
    try {
      const result = await work(this.session);
      await this.client.query('RELEASE SAVEPOINT duraflow_dead_letter_retry');
      return result;
    } catch (error) {
      await this.client.query('ROLLBACK TO SAVEPOINT duraflow_dead_letter_retry').catch(() => undefined);
      throw error;
    }
  }

  /** Ends the session, and with it the claim (committing what was written in its transaction). Never throws. */
  async release(): Promise<void> {
    if (this.inTransaction) await this.client.query('COMMIT').catch(() => undefined);
    await this.client.end().catch(() => undefined);
  }
}
