import { AgentTask } from '../domain/entities/agent-task.entity';
import { DeadLetter } from '../domain/entities/dead-letter.entity';
import { StepSummary } from '../domain/task-summaries';
import { TaskSignal } from '../persistence/signal.store';
import { effectKey } from '../util/effect-key';
import { terminalText as shown } from './terminal-text';

/** A task in `tasks list --json`: what a script filters on, no input or output. */
export interface TaskListItem {
  id: string;
  workflowName: string;
  workflowVersion: number | null;
  status: string;
  /** Held by the determinism guard (`tasks resume` runs it again). */
  held: boolean;
  priority: number;
  createdAt: Date;
  startedAt: Date | null;
  completedAt: Date | null;
  retryCount: number;
  parentTaskId: string | null;
  error: { code: string | null; message: string; stepKey: string | null } | null;
  /** The task's tags ({} when none). */
  tags: Record<string, string>;
}

/** `tasks list --json`. */
export interface TaskListReport {
  items: TaskListItem[];
  /** Pass as `--after` for the next (older) page; null on the last page. */
  nextCursor: string | null;
}

/** A step in `tasks show --json`. */
export interface TaskStepView {
  key: string;
  /** `sleep`, `signal` or `child` for a durable primitive; null for a step. */
  kind: string | null;
  status: string;
  attempts: number;
  startedAt: Date | null;
  completedAt: Date | null;
  /** From its start to its completion; null while it has not completed. */
  durationMs: number | null;
  compensatedAt: Date | null;
  error: string | null;
  /** A step's effect key (derived from the task id and the step key); null for a durable primitive. */
  effectKey: string | null;
}

/** `tasks show --json`. */
export interface TaskShowReport {
  /** The task as `workflows.get(id)` returns it. */
  task: AgentTask;
  steps: TaskStepView[];
  /** The task's first signals in the order they were sent, payloads as 200-character previews; `more` when it has others. */
  signals: { items: TaskSignal[]; more: boolean };
  /** Its open dead letters, newest first; `more` when it has others. */
  deadLetters: { items: DeadLetter[]; more: boolean };
}

export function toTaskListItem(task: AgentTask): TaskListItem {
  return {
    id: task.id,
    workflowName: task.workflowName,
    workflowVersion: task.workflowVersion,
    status: task.status,
    held: task.heldAt !== null,
    priority: task.priority,
    createdAt: task.createdAt,
    startedAt: task.startedAt,
    completedAt: task.completedAt,
    retryCount: task.retryCount,
    parentTaskId: task.parentTaskId,
    error: task.error ? { code: task.error.code ?? null, message: task.error.message, stepKey: task.error.stepKey ?? null } : null,
    tags: task.tags ?? {},
  };
}

export function toStepView(step: StepSummary): TaskStepView {
  const duration = step.startedAt && step.completedAt ? step.completedAt.getTime() - step.startedAt.getTime() : null;
  const error = step.error && typeof step.error.message === 'string' ? step.error.message : step.error ? JSON.stringify(step.error) : null;
  return {
    key: step.stepKey,
    kind: step.kind,
    status: step.status,
    attempts: step.attempt,
    startedAt: step.startedAt,
    completedAt: step.completedAt,
    durationMs: duration,
    compensatedAt: step.compensatedAt,
    error,
    effectKey: step.kind ? null : effectKey(step.taskId, step.stepKey),
  };
}

/** Rows as an aligned table, each cell escaped; `right` names the columns aligned right. */
export function table(rows: string[][], right: number[] = []): string[] {
  const cells = rows.map((row) => row.map(shown));
  const widths = cells[0].map((_, column) => Math.max(...cells.map((row) => row[column].length)));
  return cells.map((row) =>
    row
      .map((cell, column) => (right.includes(column) ? cell.padStart(widths[column]) : cell.padEnd(widths[column])))
      .join('  ')
      .trimEnd(),
  );
}

const when = (date: Date | null) => (date ? date.toISOString() : '-');

export function formatTaskList(report: TaskListReport): string[] {
  if (!report.items.length) return ['No tasks match.'];
  const lines = table([
    ['id', 'workflow', 'version', 'status', 'created', 'error'],
    ...report.items.map((task) => [
      task.id,
      task.workflowName,
      task.workflowVersion === null ? '-' : String(task.workflowVersion),
      task.held ? `${task.status} (held)` : task.status,
      when(task.createdAt),
      task.error ? oneLine(task.error.message, 60) : '',
    ]),
  ]);
  if (report.nextCursor) lines.push('', `More: --after ${report.nextCursor}`);
  return lines;
}

export function formatTaskShow(report: TaskShowReport): string[] {
  const { task } = report;
  const lines = [
    `Task ${shown(task.id)}`,
    `  workflow     ${shown(task.workflowName)}${task.workflowVersion === null ? '' : ` v${task.workflowVersion}`}`,
    `  status       ${shown(task.status)}${task.heldAt ? ` (held since ${when(task.heldAt)})` : ''}${task.rollbackReason ? ` (rollback: ${shown(task.rollbackReason)})` : ''}`,
    `  created      ${when(task.createdAt)}`,
    `  started      ${when(task.startedAt)}`,
    `  finished     ${when(task.completedAt)}`,
    `  recoveries   ${task.retryCount}`,
  ];
  if (task.parentTaskId) lines.push(`  parent       ${shown(task.parentTaskId)} (step ${shown(task.parentStepKey ?? '-')})`);
  if (task.forkedFromTaskId) lines.push(`  forked from  ${shown(task.forkedFromTaskId)} (step ${shown(task.forkedFromStep ?? '-')})`);
  if (task.error)
    lines.push(`  error        ${shown(oneLine(task.error.message, 200))}${task.error.code ? ` (${shown(task.error.code)})` : ''}`);
  lines.push('', report.steps.length ? 'Steps:' : 'Steps: none');
  if (report.steps.length) {
    const rows = report.steps.map((step) => [
      step.kind ? `${step.key} (${step.kind})` : step.key,
      step.compensatedAt ? `${step.status}, compensated` : step.status,
      String(step.attempts),
      step.durationMs === null ? '-' : `${step.durationMs} ms`,
      step.error ? oneLine(step.error, 60) : '',
    ]);
    lines.push(...table([['key', 'status', 'attempts', 'duration', 'error'], ...rows], [2, 3]).map((line) => `  ${line}`));
  }
  lines.push(...startedNeverFinished(report.steps));
  lines.push('', report.signals.items.length ? 'Signals:' : 'Signals: none');
  if (report.signals.items.length) {
    const rows = report.signals.items.map((signal) => [
      signal.id,
      signal.name,
      when(signal.createdAt),
      signal.consumedAt ? `taken by ${signal.consumedByStep ?? '-'}` : 'kept',
      signal.payloadPreview === null ? '' : oneLine(signal.payloadPreview, 60),
    ]);
    lines.push(...table([['id', 'name', 'sent', 'state', 'payload'], ...rows]).map((line) => `  ${line}`));
    if (report.signals.more) lines.push('  (more signals: workflows.listSignals(id) or GET /tasks/:id/signals)');
  }
  lines.push('', report.deadLetters.items.length ? 'Dead letters:' : 'Dead letters: none');
  for (const entry of report.deadLetters.items) {
    const message = typeof entry.error?.message === 'string' ? entry.error.message : '';
    lines.push(`  ${shown(entry.id)} step ${shown(entry.stepId)}, ${entry.retryCount} retries: ${shown(oneLine(message, 120))}`);
  }
  return lines;
}

/**
 * Steps written `running` (the step option `recordStart`) and not finished: after a crash, an
 * effect their body may have caused, to look up at the provider by its effect key.
 */
function startedNeverFinished(steps: TaskStepView[]): string[] {
  const started = steps.filter((step) => step.status === 'running' && step.effectKey);
  if (!started.length) return [];
  const rows = started.map((step) => [step.key, when(step.startedAt), String(step.attempts), step.effectKey!]);
  return ['', 'Started, never finished:', ...table([['key', 'started', 'attempt', 'effect key'], ...rows], [2]).map((line) => `  ${line}`)];
}

/** One line of at most `max` characters (cut with an ellipsis). */
function oneLine(text: string, max: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}
