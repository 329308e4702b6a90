import type { SqlExecutor } from '../persistence/duraflow-database';
import { CronSchedule } from './cron-schedule';

/** A schedule as `duraflow status` shows it: what the database holds, and its next tick. */
export interface ScheduleStatus {
  name: string;
  workflow: string;
  cron: string;
  timezone: string;
  /** Null when the stored cron or time zone no longer reads (a node of another version wrote it). */
  nextTickAt: Date | null;
  lastTickAt: Date | null;
  lastTask: { id: string; status: string | null; tickAt: Date } | null;
}

/**
 * Joins, for the schedule named by `nameColumn`, its newest tick that started a task (`t.tick_at`,
 * `t.task_id`: the primary key walked backwards) and that task's status now (`a.status`).
 */
export function newestTickTask(nameColumn: string): string {
  return `LEFT JOIN LATERAL (
         SELECT tick_at, task_id FROM duraflow_schedule_ticks k
         WHERE k.schedule_name = ${nameColumn} AND k.task_id IS NOT NULL ORDER BY k.tick_at DESC LIMIT 1
       ) t ON true
       LEFT JOIN agent_tasks a ON a.id = t.task_id`;
}

/**
 * Every schedule a node has ticked, with the task of its newest tick that started one. An
 * empty list on a database whose schema predates the schedules (no table yet).
 */
export async function readScheduleStatus(executor: SqlExecutor, now = new Date()): Promise<ScheduleStatus[]> {
  let rows: Array<{
    name: string;
    workflow_name: string;
    cron: string;
    timezone: string;
    last_tick_at: Date | null;
    tick_at: Date | null;
    task_id: string | null;
    status: string | null;
  }>;
  try {
    ({ rows } = await executor.query(
      `SELECT s.name, s.workflow_name, s.cron, s.timezone, s.last_tick_at, t.tick_at, t.task_id, a.status
       FROM duraflow_schedules s
       ${newestTickTask('s.name')}
       ORDER BY s.name`,
    ));
  } catch (error) {
    if ((error as { code?: unknown }).code === '42P01') return [];
    throw error;
  }
  return rows.map((row) => ({
    name: row.name,
    workflow: row.workflow_name,
    cron: row.cron,
    timezone: row.timezone,
    nextTickAt: nextTick(row.cron, row.timezone, now),
    lastTickAt: row.last_tick_at,
    lastTask: row.task_id && row.tick_at ? { id: row.task_id, status: row.status, tickAt: row.tick_at } : null,
  }));
}

function nextTick(cron: string, timezone: string, now: Date): Date | null {
  try {
    return new CronSchedule(cron, timezone).nextAfter(now);
  } catch {
    return null;
  }
}
