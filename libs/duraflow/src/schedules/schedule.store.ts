import { Injectable } from '@nestjs/common';
import { AgentTask } from '../domain/entities/agent-task.entity';
import { DuraflowLogger } from '../observability/duraflow-logger';
import { DuraflowDatabase, SqlExecutor } from '../persistence/duraflow-database';
import { scheduleIdempotencyKey } from '../domain/reserved-keys';
import { TaskFactory } from '../execution/task-factory';
import { MAX_CATCH_UP } from '../domain/schedule-options';
import { RegisteredSchedule } from './schedule.registry';
import { newestTickTask } from './read-schedule-status';

/**
 * How long a node may sit idle inside its tick's transaction (between its statements) before
 * PostgreSQL ends its session, rolling the tick back for another node. A live node's tick
 * transaction is idle for milliseconds; one blocked for this long by its own event loop
 * merely loses the tick to another node, or tries again.
 */
export const TICK_HOLDER_IDLE_LIMIT_MS = 5_000;

/** Tick rows kept per schedule; older ones are deleted as new ones come. */
export const SCHEDULE_TICKS_KEPT = MAX_CATCH_UP;

/** A schedule's state in the database, for `listSchedules`. */
export interface StoredScheduleState {
  name: string;
  lastTickAt: Date | null;
  lastTask: { id: string; status: string | null; tickAt: Date } | null;
  pausedAt: Date | null;
}

/**
 * The way in to `duraflow_schedules` and `duraflow_schedule_ticks`.
 *
 * Exactly one task per tick, whichever nodes try it: a tick's row and its task are written in
 * one transaction, and the row's primary key (schedule_name, tick_at) lets one transaction in;
 * a concurrent one waits for it (ON CONFLICT on an uncommitted row waits) and then writes
 * nothing, or, if it rolled back (its node died), writes the task itself. The task's
 * idempotency key (`schedule:<name>:<tick ISO>`) is a second guard.
 *
 * Tick rows are pruned to the newest SCHEDULE_TICKS_KEPT per schedule. No node ever tries a
 * tick older than those: a node looks only at the newest `maxCatchUp` (at most as many) ticks
 * up to now, or at ticks after `last_tick_at`.
 */
@Injectable()
export class ScheduleStore {
  private readonly logger = new DuraflowLogger();

  constructor(
    private readonly db: DuraflowDatabase,
    private readonly factory: TaskFactory,
  ) {}

  /**
   * Writes this node's definitions (a new schedule gets its row; a known one keeps its
   * `last_tick_at`) and returns, per schedule, the time after which ticks are missed ones: the
   * newest tick done, or when the row was created for a schedule that never ticked.
   */
  async saveDefinitions(schedules: RegisteredSchedule[]): Promise<Map<string, Date>> {
    const { rows } = await this.db.query<{ name: string; since: Date }>(
      `INSERT INTO duraflow_schedules AS s (name, workflow_name, cron, timezone)
       SELECT * FROM unnest($1::varchar[], $2::varchar[], $3::varchar[], $4::varchar[])
       ON CONFLICT (name) DO UPDATE
         SET workflow_name = EXCLUDED.workflow_name, cron = EXCLUDED.cron, timezone = EXCLUDED.timezone, updated_at = now()
       RETURNING s.name, COALESCE(s.last_tick_at, s.created_at) AS since`,
      [
        schedules.map((s) => s.name),
        schedules.map((s) => s.workflow),
        schedules.map((s) => s.cron.expression),
        schedules.map((s) => s.cron.timezone),
      ],
    );
    return new Map(rows.map((row) => [row.name, row.since]));
  }

  /**
   * Starts the tick's task unless another node did: the id of the task this call created, or
   * null. Also advances the schedule's `last_tick_at` and prunes its old tick rows.
   */
  async startTick(schedule: RegisteredSchedule, tickAt: Date): Promise<string | null> {
    return this.db.transaction(async (executor) => {
      // A node that freezes holding the row (SIGSTOP, a VM paused) would hold every other node's
      // tick too: its session is ended once it has been idle in this transaction that long.
      const claimed = await executor.query(
        `INSERT INTO duraflow_schedule_ticks (schedule_name, tick_at)
         SELECT $1, $2 FROM (SELECT set_config('idle_in_transaction_session_timeout', $3, true)) AS frozen_holder_limit
         ON CONFLICT DO NOTHING RETURNING tick_at`,
        [schedule.name, tickAt, String(TICK_HOLDER_IDLE_LIMIT_MS)],
        'duraflow_claim_schedule_tick',
      );
      if (!claimed.rowCount) return null;
      // Paused (ScheduleControl, on any node): the tick is done without a task, so a resume does not catch it up.
      const paused = await executor.query(
        `WITH skipped AS (
           UPDATE duraflow_schedules SET last_tick_at = GREATEST(last_tick_at, $2), updated_at = now()
           WHERE name = $1 AND paused_at IS NOT NULL RETURNING name
         )
         DELETE FROM duraflow_schedule_ticks WHERE schedule_name IN (SELECT name FROM skipped) AND tick_at = $2 RETURNING tick_at`,
        [schedule.name, tickAt],
        'duraflow_skip_paused_schedule_tick',
      );
      if (paused.rowCount) return null;
      const task = await this.createTickTask(schedule, tickAt, executor);
      // The pruning subquery walks the primary key backwards, SCHEDULE_TICKS_KEPT entries at most.
      await executor.query(
        `WITH ticked AS (
           UPDATE duraflow_schedule_ticks SET task_id = $3 WHERE schedule_name = $1 AND tick_at = $2
         ), advanced AS (
           UPDATE duraflow_schedules SET last_tick_at = GREATEST(last_tick_at, $2), updated_at = now() WHERE name = $1
         ), pruned AS (
           DELETE FROM duraflow_schedule_ticks
           WHERE schedule_name = $1 AND tick_at < (
             SELECT tick_at FROM duraflow_schedule_ticks WHERE schedule_name = $1 ORDER BY tick_at DESC OFFSET $4 LIMIT 1)
         )
         SELECT 1`,
        [schedule.name, tickAt, task.id, SCHEDULE_TICKS_KEPT - 1],
        'duraflow_finish_schedule_tick',
      );
      return task.id;
    });
  }

  /**
   * The tick's task, created in the transaction that claimed the tick's row. A task that already
   * holds the tick's key was not made by this tick (its row was claimed just now, and a task is
   * only made with its tick's row) but by someone else under the schedule's reserved key, before
   * callers were refused it: it is never taken for the tick's run, which is made without the key.
   */
  private async createTickTask(schedule: RegisteredSchedule, tickAt: Date, executor: SqlExecutor): Promise<AgentTask> {
    const tick = { ...schedule.task, idempotencyKey: scheduleIdempotencyKey(schedule.name, tickAt) };
    const { task, created } = await this.factory.create(tick, executor);
    if (created) return task;
    this.logger.warn(
      `Task ${task.id} holds the idempotency key "${tick.idempotencyKey}" of schedule "${schedule.name}" but was not created ` +
        `by it; the tick's run is created without the key. Cancel that task if nobody expects it.`,
      { taskId: task.id, workflow: task.workflowName },
    );
    return (await this.factory.create({ ...tick, idempotencyKey: null }, executor)).task;
  }

  /** Pauses (keeping the first pause's time) or resumes a schedule on every node: its row's `paused_at`, read by each tick. */
  async setPaused(scheduleName: string, paused: boolean): Promise<void> {
    await this.db.query(
      `UPDATE duraflow_schedules SET paused_at = CASE WHEN $2 THEN COALESCE(paused_at, now()) END, updated_at = now() WHERE name = $1`,
      [scheduleName, paused],
    );
  }

  /** Marks ticks up to `tickAt` done without a task (skipped by the catch-up policy). */
  async skipTicksThrough(scheduleName: string, tickAt: Date): Promise<void> {
    await this.db.query(
      `UPDATE duraflow_schedules SET last_tick_at = GREATEST(last_tick_at, $2), updated_at = now() WHERE name = $1`,
      [scheduleName, tickAt],
      'duraflow_skip_schedule_ticks',
    );
  }

  /** Each schedule's newest tick done and the task of its newest tick that started one (with the task's status now). */
  async readStates(names: string[]): Promise<Map<string, StoredScheduleState>> {
    const { rows } = await this.db.query<{
      name: string;
      last_tick_at: Date | null;
      tick_at: Date | null;
      task_id: string | null;
      status: string | null;
      paused_at: Date | null;
    }>(
      `SELECT n.name, s.last_tick_at, t.tick_at, t.task_id, a.status, s.paused_at
       FROM unnest($1::varchar[]) AS n(name)
       LEFT JOIN duraflow_schedules s ON s.name = n.name
       ${newestTickTask('n.name')}`,
      [names],
    );
    return new Map(
      rows.map((row) => [
        row.name,
        {
          name: row.name,
          lastTickAt: row.last_tick_at,
          lastTask: row.task_id && row.tick_at ? { id: row.task_id, status: row.status, tickAt: row.tick_at } : null,
          pausedAt: row.paused_at,
        },
      ]),
    );
  }
}
