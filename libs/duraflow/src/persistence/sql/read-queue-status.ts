import type { SqlExecutor } from '../duraflow-database';
import { LeaderLeaseRow, readLeaderLease } from './leader-lease';

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

export interface QueueStatus {
  tasks: WorkflowTaskCounts[];
  oldestPending: OldestPendingTask | null;
  /** Pending tasks whose `scheduled_at` is still ahead. */
  scheduledLater: number;
  deadLetters: { total: number; byWorkflow: Array<{ workflowName: string | null; count: number }>; oldest: Date | null };
  /** The reaper's PostgreSQL leader lease row (expired or not); null when no node ever led under the key. */
  postgresLeader: LeaderLeaseRow | null;
}

/**
 * What an operator asks first, read in one snapshot: tasks by workflow and status, how long the
 * oldest runnable task has waited, the dead letters, and the reaper's PostgreSQL leader lease.
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
       WHERE status = 'pending' AND deleted_at IS NULL AND (scheduled_at IS NULL OR scheduled_at <= duraflow_now())
       ORDER BY runnable_since, id LIMIT 1
     )
     SELECT due.id, due.workflow_name, due.runnable_since,
            (EXTRACT(EPOCH FROM duraflow_now() - due.runnable_since) * 1000)::float8 AS waiting_ms,
            (SELECT count(*)::int FROM agent_tasks
             WHERE status = 'pending' AND deleted_at IS NULL AND scheduled_at > duraflow_now()) AS scheduled_later
     FROM (SELECT 1) AS one LEFT JOIN due ON true`,
  );
  const deadLetters = await executor.query<{ workflow_name: string | null; count: number; oldest: Date }>(
    `SELECT t.workflow_name, count(*)::int AS count, min(d.created_at) AS oldest
     FROM dead_letter_queue d LEFT JOIN agent_tasks t ON t.id = d.task_id
     GROUP BY t.workflow_name ORDER BY t.workflow_name`,
  );
  const leader = await readLeaderLease(executor, leaderKey);

  const byWorkflow = new Map<string, Record<string, number>>();
  for (const row of counts.rows) {
    const entry = byWorkflow.get(row.workflow_name) ?? {};
    entry[row.status] = row.count;
    byWorkflow.set(row.workflow_name, entry);
  }
  const due = pending.rows[0];
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
    postgresLeader: leader,
  };
}
