import { TaskStatus } from '../domain/task-status';
import { REAPER_LEADER_KEY } from '../domain/duraflow.constants';
import { DeployStatus, readDeployStatus } from '../persistence/sql/read-deploy-status';
import { FlowLimitStats } from '../domain/flow-control';
import type { SqlExecutor } from '../persistence/duraflow-database';
import { readFlowLimits } from '../persistence/sql/read-flow-limits';
import { QueueStatus, readQueueStatus } from '../persistence/sql/read-queue-status';
import { readScheduleStatus, ScheduleStatus } from '../schedules/read-schedule-status';
import { SchemaMissingError } from './cli.errors';
import { connectDatabase, describeDatabase } from './database-connection';
import { readRedisLeader, RedisLeader } from './leader-status';
import { terminalText as shown } from './terminal-text';

export interface StatusCommandOptions {
  url: string;
  /** Read the leader from this Redis instead of the PostgreSQL leader lease row. */
  redis?: string;
  leaderKey?: string;
  json: boolean;
}

export interface StatusReport extends QueueStatus, DeployStatus {
  database: string;
  /** Every schedule a node has ticked (docs/schedules.md). */
  schedules: ScheduleStatus[];
  /** What waits on which flow limit (the limits as the workers registered them); empty when no workflow has one. */
  limits: FlowLimitStats[];
  leader:
    | { via: 'redis'; key: string; workerId: string | null; expiresInMs: number | null }
    | { via: 'postgres'; key: string; lease: QueueStatus['postgresLeader'] };
}

/** `duraflow status`: the queue at a glance, as text or JSON. */
export async function statusCommand(options: StatusCommandOptions, print: (line: string) => void): Promise<StatusReport> {
  const key = options.leaderKey ?? REAPER_LEADER_KEY;
  const client = await connectDatabase(options.url);
  let queue: QueueStatus;
  let deploy: DeployStatus;
  let schedules: ScheduleStatus[];
  let limits: FlowLimitStats[];
  const executor: SqlExecutor = {
    query: async (text, values) => {
      const result = await client.query(text, values);
      return { rows: result.rows, rowCount: result.rowCount ?? 0 };
    },
  };
  try {
    queue = await readQueueStatus(executor, key);
    deploy = await readDeployStatus(executor);
    schedules = await readScheduleStatus(executor);
    limits = await readFlowLimits(executor);
  } catch (error) {
    if ((error as { code?: unknown }).code === '42P01') {
      throw new SchemaMissingError(`${describeDatabase(options.url)} has no Duraflow tables: run \`duraflow migrate\` first.`);
    }
    throw error;
  } finally {
    await client.end().catch(() => undefined);
  }
  const redisLeader: RedisLeader | undefined = options.redis ? await readRedisLeader(options.redis, key) : undefined;
  const report: StatusReport = {
    database: describeDatabase(options.url),
    ...queue,
    ...deploy,
    schedules,
    limits,
    leader: redisLeader ? { via: 'redis', key, ...redisLeader } : { via: 'postgres', key, lease: queue.postgresLeader },
  };
  if (options.json) print(JSON.stringify(report, null, 2));
  else formatStatus(report).forEach((line) => print(line));
  return report;
}

const STATUS_COLUMNS = Object.values(TaskStatus);

export function formatStatus(report: StatusReport): string[] {
  const lines = [`Duraflow on ${shown(report.database)}`, ''];
  if (report.tasks.length) {
    const totals: Record<string, number> = {};
    for (const { counts } of report.tasks) {
      for (const [status, count] of Object.entries(counts)) totals[status] = (totals[status] ?? 0) + count;
    }
    const rows = [
      ['workflow', ...STATUS_COLUMNS],
      ...report.tasks.map(({ workflowName, counts }) => [
        shown(workflowName),
        ...STATUS_COLUMNS.map((status) => String(counts[status] ?? 0)),
      ]),
      ['(all)', ...STATUS_COLUMNS.map((status) => String(totals[status] ?? 0))],
    ];
    const widths = rows[0].map((_, column) => Math.max(...rows.map((row) => row[column].length)));
    lines.push('Tasks:');
    for (const row of rows) {
      lines.push('  ' + row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]))).join('  '));
    }
  } else {
    lines.push('Tasks: none');
  }
  lines.push('');
  lines.push(...formatDeployStatus(report));
  const oldest = report.oldestPending;
  lines.push(
    oldest
      ? `Oldest runnable pending task: waiting ${formatDuration(oldest.waitingMs)} (${shown(oldest.id)}, ${shown(oldest.workflowName)})`
      : 'Oldest runnable pending task: none',
  );
  lines.push(`Pending tasks scheduled for later: ${report.scheduledLater}`);
  const dead = report.deadLetters;
  lines.push(
    dead.total
      ? `Dead letters: ${dead.total} (${dead.byWorkflow.map((entry) => `${shown(entry.workflowName ?? '(task deleted)')}: ${entry.count}`).join(', ')}), oldest ${dead.oldest!.toISOString()}`
      : 'Dead letters: none',
  );
  lines.push(...formatLimits(report.limits));
  lines.push(formatLeader(report.leader));
  lines.push(...formatSchedules(report.schedules));
  return lines;
}

/** Unfinished tasks per workflow version, and the patches unfinished tasks recorded as false. */
function formatDeployStatus(report: DeployStatus): string[] {
  const lines: string[] = [];
  if (report.unfinishedByVersion.length) {
    lines.push('Unfinished tasks by workflow version:');
    for (const { workflowName, version, pending, running, held } of report.unfinishedByVersion) {
      lines.push(
        `  ${shown(workflowName)} v${shown(version)}: ${pending} pending, ${running} running${held ? `, ${held} held (determinism guard)` : ''}`,
      );
    }
  } else {
    lines.push('Unfinished tasks by workflow version: none');
  }
  lines.push(
    report.patchesRecordedFalse.length
      ? `Patches unfinished tasks recorded as false (keep their old branch): ${report.patchesRecordedFalse
          .map(({ workflowName, patchId, unfinishedTasks }) => `${shown(workflowName)} "${shown(patchId)}": ${unfinishedTasks}`)
          .join(', ')}`
      : 'Patches unfinished tasks recorded as false: none',
  );
  lines.push('');
  return lines;
}

function formatSchedules(schedules: ScheduleStatus[]): string[] {
  if (!schedules.length) return ['Schedules: none'];
  const when = (date: Date | null | undefined) => (date ? date.toISOString() : '-');
  const rows = [
    ['schedule', 'workflow', 'cron', 'timezone', 'next tick', 'last tick', 'last task'],
    ...schedules.map((s) => [
      s.name,
      s.workflow,
      s.cron,
      s.timezone,
      when(s.nextTickAt),
      when(s.lastTickAt),
      s.lastTask ? `${s.lastTask.id} (${s.lastTask.status ?? 'deleted'}, tick ${when(s.lastTask.tickAt)})` : '-',
    ]),
  ].map((row) => row.map(shown));
  const widths = rows[0].map((_, column) => Math.max(...rows.map((row) => row[column].length)));
  return [
    'Schedules:',
    ...rows.map(
      (row) =>
        '  ' +
        row
          .map((cell, column) => cell.padEnd(widths[column]))
          .join('  ')
          .trimEnd(),
    ),
  ];
}

/** Flow limits: one line per limit (per key for the keys at their limit), running against the limit and the runnable pending behind it. */
function formatLimits(limits: FlowLimitStats[]): string[] {
  if (!limits.length) return [];
  const rows = [
    ['workflow', 'key', 'limit', 'running', 'pending'],
    ...limits.map((entry) => [entry.workflow, entry.key ?? '', entry.kind, `${entry.running}/${entry.limit}`, String(entry.waiting)]),
  ].map((row) => row.map(shown));
  const widths = rows[0].map((_, column) => Math.max(...rows.map((row) => row[column].length)));
  return [
    'Flow limits (a rate limit counts the starts in its window):',
    ...rows.map(
      (row) => '  ' + row.map((cell, column) => (column < 3 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]))).join('  '),
    ),
  ];
}

function formatLeader(leader: StatusReport['leader']): string {
  if (leader.via === 'redis') {
    return leader.workerId
      ? `Reaper leader: ${shown(leader.workerId)} (Redis key ${shown(leader.key)}${leader.expiresInMs === null ? '' : `, expires in ${formatDuration(leader.expiresInMs)} unless renewed`})`
      : `Reaper leader: none (Redis key ${shown(leader.key)} is not set)`;
  }
  const lease = leader.lease;
  if (!lease) return `Reaper leader: none (no node has held the PostgreSQL leader lease "${shown(leader.key)}")`;
  if (lease.expiresInMs <= 0) {
    return (
      `Reaper leader: none (the PostgreSQL leader lease "${shown(leader.key)}" of ${shown(lease.holder)}, term ${lease.term}, ` +
      `expired ${formatDuration(-lease.expiresInMs)} ago)`
    );
  }
  return (
    `Reaper leader: ${shown(lease.holder)} (PostgreSQL leader lease "${shown(leader.key)}", term ${lease.term}, ` +
    `expires in ${formatDuration(lease.expiresInMs)} unless renewed, held since ${lease.acquiredAt.toISOString()})`
  );
}

function formatDuration(ms: number): string {
  if (ms < 1_000) return `${ms} ms`;
  const seconds = Math.floor(ms / 1_000);
  if (seconds < 60) return `${(ms / 1_000).toFixed(1)} s`;
  const parts = [
    [Math.floor(seconds / 86_400), 'd'],
    [Math.floor(seconds / 3_600) % 24, 'h'],
    [Math.floor(seconds / 60) % 60, 'm'],
    [seconds % 60, 's'],
  ] as const;
  return parts
    .filter(([value]) => value > 0)
    .map(([value, unit]) => `${value}${unit}`)
    .join(' ');
}
