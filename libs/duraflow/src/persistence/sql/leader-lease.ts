import type { SqlExecutor } from '../duraflow-database';

/** The reaper's leader lease row of one key (`duraflow_leader`), as `duraflow status` shows it. */
export interface LeaderLeaseRow {
  holder: string;
  /** Grows by one each time another node (or the same one after an expiry) takes the lease. */
  term: string;
  acquiredAt: Date;
  /** Milliseconds until it expires unless renewed; zero or less once it has expired. */
  expiresInMs: number;
}

/**
 * One statement per election tick, on the election's own connection: renews the lease while
 * `holder` holds it (keeping its term), or takes it (term + 1) once it has expired or once the
 * session that held it is gone (its process died: no need to wait for the expiry), or creates
 * it (term 1). Returns the term this holder now leads under, or null when another node holds a
 * live lease. The expiry is computed by the database at execution, later than the caller sent
 * it, so a caller that counts its lease from the moment it sent the statement never believes it
 * longer than the row says. A holder whose session was cut while its process lives loses the
 * lease to the taker; its reaping passes are fenced by the term, so that is safe.
 */
export async function acquireOrRenewLeaderLease(db: SqlExecutor, name: string, holder: string, ttlMs: number): Promise<string | null> {
  const { rows } = await db.query<{ term: string }>(
    `INSERT INTO duraflow_leader AS l (name, holder, term, expires_at, acquired_at, holder_pid)
     VALUES ($1, $2, 1, clock_timestamp() + $3 * interval '1 millisecond', clock_timestamp(), pg_backend_pid())
     ON CONFLICT (name) DO UPDATE
     SET term = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > clock_timestamp() THEN l.term ELSE l.term + 1 END,
         acquired_at = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > clock_timestamp() THEN l.acquired_at ELSE clock_timestamp() END,
         holder = EXCLUDED.holder,
         expires_at = EXCLUDED.expires_at,
         holder_pid = EXCLUDED.holder_pid
     WHERE l.holder = EXCLUDED.holder
        OR l.expires_at <= clock_timestamp()
        OR (l.holder_pid IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = l.holder_pid))
     RETURNING l.term::text AS term`,
    [name, holder, ttlMs],
  );
  return rows[0]?.term ?? null;
}

/** Expires the lease now if `holder` holds it (the row stays, so its term keeps growing). */
export async function releaseLeaderLease(db: SqlExecutor, name: string, holder: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE duraflow_leader SET expires_at = clock_timestamp()
     WHERE name = $1 AND holder = $2 AND expires_at > clock_timestamp()`,
    [name, holder],
  );
  return rowCount > 0;
}

/** The lease row of `name`, expired or not; null when no node ever led under that key. */
export async function readLeaderLease(db: SqlExecutor, name: string): Promise<LeaderLeaseRow | null> {
  const { rows } = await db.query<{ holder: string; term: string; acquired_at: Date; expires_in_ms: number }>(
    `SELECT holder, term::text AS term, acquired_at,
            (EXTRACT(EPOCH FROM expires_at - clock_timestamp()) * 1000)::float8 AS expires_in_ms
     FROM duraflow_leader WHERE name = $1`,
    [name],
  );
  const row = rows[0];
  return row ? { holder: row.holder, term: row.term, acquiredAt: row.acquired_at, expiresInMs: Math.round(row.expires_in_ms) } : null;
}
