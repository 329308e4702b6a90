import { Client } from 'pg';
import { runnable } from '../persistence/lifecycle/task-lifecycle';
import { LATEST_DUE_TIME } from '../validation/due-time';

/** What the queue of a test environment holds now. */
export interface EnvQueueState {
  running: number;
  /** Pending, due by the engine's clock, not held. */
  runnable: number;
  /** The workflows of the tasks above. */
  busyWorkflows: string[];
  /** The earliest wake-up of a waiting task after the engine's clock (a wait with no deadline has none). */
  nextWakeUp: number | undefined;
  /** Of `runnable`, the tasks a full rate-limit window holds back (they wait for `nextRateOpening`). */
  rateHeld: number;
  /** When the earliest start in a rate-limit window leaves it, freeing a place. */
  nextRateOpening: number | undefined;
  /** Debounces and batches due by the engine's clock whose task has not started. */
  dueGroups: number;
  /** The earliest due time of a debounce or batch still to come. */
  nextGroupDue: number | undefined;
}

/** The environment's reads of its own database (past the library) and its clock's one write. */
export class EnvQueue {
  constructor(private readonly client: Client) {}

  /** One statement: the counts and the next wake-up, as of one snapshot. */
  async state(): Promise<EnvQueueState> {
    const { rows } = await this.client.query(
      `SELECT count(*) FILTER (WHERE t.status = 'running')::int AS running,
              count(*) FILTER (WHERE ${runnable('t')} AND t.held_at IS NULL)::int AS runnable,
              COALESCE(array_agg(DISTINCT t.workflow_name) FILTER (WHERE t.status = 'running' OR (${runnable('t')} AND t.held_at IS NULL)), '{}') AS busy,
              (EXTRACT(EPOCH FROM min(t.scheduled_at) FILTER (
                 WHERE t.status = 'pending' AND t.deleted_at IS NULL AND t.held_at IS NULL
                   AND t.scheduled_at > duraflow_now() AND t.scheduled_at < $1)) * 1000)::float8 AS next_wake_up,
              (SELECT count(*)::int FROM agent_tasks r JOIN flow_limits l ON l.workflow_name = r.workflow_name
               WHERE ${runnable('r')} AND r.held_at IS NULL AND l.rate_limit IS NOT NULL
                 AND (SELECT count(*) FROM flow_starts s WHERE s.workflow_name = l.workflow_name
                        AND (NOT l.rate_per_key OR s.rate_key = r.concurrency_key)
                        AND s.started_at > duraflow_now() - l.rate_period_ms * interval '1 millisecond') >= l.rate_limit) AS rate_held,
              (SELECT (EXTRACT(EPOCH FROM min(s.started_at + l.rate_period_ms * interval '1 millisecond')) * 1000)::float8
               FROM flow_starts s JOIN flow_limits l ON l.workflow_name = s.workflow_name
               WHERE l.rate_limit IS NOT NULL AND s.started_at + l.rate_period_ms * interval '1 millisecond' > duraflow_now()) AS next_rate_opening,
              (SELECT count(*)::int FROM duraflow_event_groups g WHERE g.started_at IS NULL AND g.due_at <= duraflow_now()) AS due_groups,
              (SELECT (EXTRACT(EPOCH FROM min(g.due_at)) * 1000)::float8 FROM duraflow_event_groups g
               WHERE g.started_at IS NULL AND g.due_at > duraflow_now()) AS next_group_due
       FROM agent_tasks t
       WHERE t.status IN ('running', 'pending')`,
      [LATEST_DUE_TIME],
    );
    const row = rows[0];
    return {
      running: row.running,
      runnable: row.runnable,
      busyWorkflows: row.busy,
      nextWakeUp: row.next_wake_up === null ? undefined : Number(row.next_wake_up),
      rateHeld: row.rate_held,
      nextRateOpening: row.next_rate_opening === null ? undefined : Number(row.next_rate_opening),
      dueGroups: row.due_groups,
      nextGroupDue: row.next_group_due === null ? undefined : Number(row.next_group_due),
    };
  }

  async setClockOffset(offsetMs: number): Promise<void> {
    await this.client.query(`UPDATE duraflow_test_clock SET offset_ms = GREATEST(offset_ms, $1::bigint)`, [Math.round(offsetMs)]);
  }
}
