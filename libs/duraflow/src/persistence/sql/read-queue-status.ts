import { advisoryLockId } from '../../util/advisory-lock-id';
import { workerIdOfLeaderSession } from '../../leader/leader-election';
import type { SqlExecutor } from '../duraflow-database';

/** Tasks of one workflow by status (only statuses that have tasks). */
export interface WorkflowTaskCounts {
  workflowName: string;
  counts: Record<string, number>;
}

export interface OldestPendingTask {
  id: string;
  workflowName: string;
  /** Since when it could have run: created, or its `scheduled_at` if that came later. */
  runnableSince: Date;
  waitingMs: number;
}

/** The session holding the reaper's PostgreSQL advisory lock. */
export interface PostgresLeaderSession {
  pid: number;
  /** From the session's application_name (cut to 47 characters by PostgreSQL's 63). */
  workerId: string | undefined;
  applicationName: string | null;
  clientAddress: string | null;
  backendStart: Date;
}

export interface QueueStatus {
  tasks: WorkflowTaskCounts[];
  oldestPending: OldestPendingTask | null;
  /** Pending tasks whose `scheduled_at` is still ahead. */
  scheduledLater: number;
  deadLetters: { total: number; byWorkflow: Array<{ workflowName: string | null; count: number }>; oldest: Date | null };
  postgresLeader: PostgresLeaderSession | null;
}

/**
 * What an operator asks first, read in one snapshot: tasks by workflow and status, how long the
 * oldest runnable task has waited, the dead letters, and who holds the reaper's advisory lock.
 * Read-only; the counts scan agent_tasks, fine for a command an operator runs by hand.
 */
export async function readQueueStatus(executor: SqlExecutor, leaderKey: string): Promise<QueueStatus> {
  const counts = await executor.query<{ workflow_name: string; status: string; count: number }>(
    `SELECT workflow_name, status, count(*)::int AS count
     FROM agent_tasks WHERE deleted_at IS NULL
     GROUP BY workflow_name, status ORDER BY workflow_name, status`,
  );
  const pending = await executor.query<{
    id: string | null;
    workflow_name: string | null;
    runnable_since: Date | null;
    waiting_ms: number | null;
    scheduled_later: number;
  }>(
    `WITH due AS (
       SELECT id, workflow_name, GREATEST(created_at, COALESCE(scheduled_at, created_at)) AS runnable_since
       FROM agent_tasks
       WHERE status = 'pending' AND deleted_at IS NULL AND (scheduled_at IS NULL OR scheduled_at <= now())
       ORDER BY runnable_since, id LIMIT 1
     )
     SELECT due.id, due.workflow_name, due.runnable_since,
            (EXTRACT(EPOCH FROM now() - due.runnable_since) * 1000)::float8 AS waiting_ms,
            (SELECT count(*)::int FROM agent_tasks
             WHERE status = 'pending' AND deleted_at IS NULL AND scheduled_at > now()) AS scheduled_later
     FROM (SELECT 1) AS one LEFT JOIN due ON true`,
  );
  const deadLetters = await executor.query<{ workflow_name: string | null; count: number; oldest: Date }>(
    `SELECT t.workflow_name, count(*)::int AS count, min(d.created_at) AS oldest
     FROM dead_letter_queue d LEFT JOIN agent_tasks t ON t.id = d.task_id
     GROUP BY t.workflow_name ORDER BY t.workflow_name`,
  );
  // A bigint advisory lock shows in pg_locks as its high half (classid) and low half (objid), objsubid 1.
  const leader = await executor.query<{ pid: number; application_name: string | null; client_addr: string | null; backend_start: Date }>(
    `SELECT a.pid, a.application_name, a.client_addr::text AS client_addr, a.backend_start
     FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
     WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
       AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND l.classid = (($1::bigint >> 32) & 4294967295)::oid
       AND l.objid = ($1::bigint & 4294967295)::oid`,
    [advisoryLockId(leaderKey)],
  );

  const byWorkflow = new Map<string, Record<string, number>>();
  for (const row of counts.rows) {
    const entry = byWorkflow.get(row.workflow_name) ?? {};
    entry[row.status] = row.count;
    byWorkflow.set(row.workflow_name, entry);
  }
  const due = pending.rows[0];
  const session = leader.rows[0];
  return {
    tasks: [...byWorkflow].map(([workflowName, taskCounts]) => ({ workflowName, counts: taskCounts })),
    oldestPending: due?.id
      ? {
          id: due.id,
          workflowName: due.workflow_name!,
          runnableSince: due.runnable_since!,
          waitingMs: Math.max(0, Math.round(due.waiting_ms!)),
        }
      : null,
    scheduledLater: due?.scheduled_later ?? 0,
    deadLetters: {
      total: deadLetters.rows.reduce((sum, row) => sum + row.count, 0),
      byWorkflow: deadLetters.rows.map((row) => ({ workflowName: row.workflow_name, count: row.count })),
      oldest: deadLetters.rows.length ? new Date(Math.min(...deadLetters.rows.map((row) => row.oldest.getTime()))) : null,
    },
    postgresLeader: session
      ? {
          pid: session.pid,
          workerId: workerIdOfLeaderSession(session.application_name),
          applicationName: session.application_name,
          clientAddress: session.client_addr,
          backendStart: session.backend_start,
        }
      : null,
  };
}
