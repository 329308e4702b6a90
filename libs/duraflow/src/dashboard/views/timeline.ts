import { AgentTask } from '../../domain/entities/agent-task.entity';
import { DeadLetter } from '../../domain/entities/dead-letter.entity';
import { StepSummary } from '../../domain/task-summaries';
import { RunLogLine } from '../../persistence/run-log.store';
import { durationBetween, formatDuration, timeOfDayElement } from './format';
import { html, Html } from './html';
import { statusBadge, ViewContext } from './layout';
import { compactValue, errorBlock } from './values';

/**
 * One line of a task's timeline: a row of step_runs, a step or a durable primitive's (a sleep,
 * a signal wait, a child, a patch marker: its `kind`), with its dead letter if it has one. Another
 * kind of line is a member of this union and a renderer in TIMELINE_ROWS; the table, its order and
 * the live updates take it as it is.
 */
export type TimelineEntry = { kind: 'step'; step: StepSummary; deadLetter: DeadLetter | undefined };

/** The time span a timeline's bars are drawn against: the task's start to its end (or now). */
interface Span {
  from: number;
  to: number;
}

type RowRenderer<K extends TimelineEntry['kind']> = (
  entry: Extract<TimelineEntry, { kind: K }>,
  index: number,
  task: AgentTask,
  span: Span,
  context: ViewContext,
) => Html;

const TIMELINE_ROWS: { [K in TimelineEntry['kind']]: RowRenderer<K> } = {
  step: stepRow,
};

export function timelineEntries(steps: StepSummary[], deadLetters: DeadLetter[]): TimelineEntry[] {
  const byStep = new Map(deadLetters.map((entry) => [entry.stepId, entry]));
  return steps.map((step) => ({ kind: 'step', step, deadLetter: byStep.get(step.id) }));
}

export function timelineTable(task: AgentTask, entries: TimelineEntry[], context: ViewContext): Html {
  if (!entries.length) return html`<p class="muted">No step has run yet.</p>`;
  const span = timelineSpan(task, entries, context.now);
  return html`<div class="table-wrap"><table class="timeline">
  <caption class="skip">The task's steps in the order they completed, then the unfinished; times in UTC</caption>
  <thead><tr>
    <th scope="col" class="num">#</th><th scope="col">Step</th><th scope="col">Status</th><th scope="col">Started</th>
    <th scope="col">Ended</th><th scope="col" class="num">Duration</th><th scope="col" class="num">Attempts</th>
    <th scope="col">Span</th><th scope="col">Output or error</th><th scope="col">Undone</th><th scope="col">Fork</th>
  </tr></thead>
  <tbody>
  ${entries.map((entry, index) => TIMELINE_ROWS[entry.kind](entry, index, task, span, context))}
  </tbody>
</table></div>`;
}

function stepRow(entry: TimelineEntry, index: number, task: AgentTask, span: Span, context: ViewContext): Html {
  const { step } = entry;
  const { links, options } = context;
  const day = task.startedAt ?? task.createdAt;
  // A failed attempt records when it started, not when it ended.
  const duration = step.completedAt ? durationBetween(step.startedAt, step.completedAt) : null;
  return html`<tr id="step-${step.id}">
  <td class="num">${index + 1}</td>
  <td class="key"><code>${step.stepKey}</code>${primitiveLabel(step, day)}</td>
  <td>${statusBadge(step.status)}</td>
  <td>${timeOfDayElement(step.startedAt, day)}</td>
  <td>${timeOfDayElement(step.completedAt, day)}</td>
  <td class="num">${formatDuration(duration)}</td>
  <td class="num">${step.attempt}</td>
  <td class="bar">${spanBar(step, span)}</td>
  <td><div class="values-cell">
    ${compactValue({ id: `step-${step.id}-input`, label: 'input', preview: step.input, href: links.stepValue(task.id, step.stepKey, 'input') })}
    ${compactValue({ id: `step-${step.id}-output`, label: 'output', preview: step.output, href: links.stepValue(task.id, step.stepKey, 'output') })}
    ${errorBlock(step.error, `step-${step.id}-stack`, links.stepValue(task.id, step.stepKey, 'error'), Math.min(options.previewChars, 300))}
  </div></td>
  <td>${compensationCell(step, entry.deadLetter, day)}</td>
  <td><a class="button secondary" href="${links.fork(task.id, step.stepKey)}" title="A new task that keeps the steps before this one and runs this one and the rest anew">Fork from here…</a></td>
</tr>`;
}

/** What a durable primitive's row is (a sleep and its end, a signal wait and its deadline, a child); nothing for a step. */
function primitiveLabel(step: StepSummary, day: Date): Html {
  if (!step.kind) return html``;
  const label =
    step.kind === 'sleep'
      ? html`sleep${step.wakeAt && html` until ${timeOfDayElement(step.wakeAt, day)}`}`
      : step.kind === 'signal'
        ? html`signal wait${step.wakeAt && html` (deadline ${timeOfDayElement(step.wakeAt, day)})`}`
        : step.kind === 'child'
          ? html`child workflow`
          : html`${step.kind}`;
  return html`<br><span class="muted kind">${label}</span>`;
}

/** Whether and when the step was undone; its compensation's name is in the title (and in the Compensations table). */
function compensationCell(step: StepSummary, deadLetter: DeadLetter | undefined, day: Date): Html {
  if (!step.compensationFn) return html`<span class="muted">—</span>`;
  const state = step.compensatedAt
    ? html`${statusBadge('compensated')}<br>${timeOfDayElement(step.compensatedAt, day)}`
    : deadLetter
      ? html`<a href="#dead-letter-${deadLetter.id}">${statusBadge('failed')} dead letter</a>`
      : html`<span class="muted">not undone</span>`;
  return html`<span title="${step.compensationFn}">${state}</span>`;
}

function timelineSpan(task: AgentTask, entries: TimelineEntry[], now: Date): Span {
  const starts = entries.map((entry) => entry.step.startedAt?.getTime()).filter((time): time is number => time !== undefined);
  const ends = entries.map((entry) => entry.step.completedAt?.getTime()).filter((time): time is number => time !== undefined);
  const from = Math.min(task.startedAt?.getTime() ?? Infinity, ...starts);
  const to = Math.max(task.completedAt?.getTime() ?? (task.startedAt ? now.getTime() : -Infinity), ...ends);
  return Number.isFinite(from) && Number.isFinite(to) && to > from ? { from, to } : { from: 0, to: 1 };
}

/** The step's run as a bar on the task's span: SVG attributes, which the policy allows where inline styles are not. */
function spanBar(step: StepSummary, span: Span): Html {
  if (!step.startedAt) return html``;
  const width = span.to - span.from;
  const start = step.startedAt.getTime();
  const end = step.completedAt?.getTime() ?? start;
  const x = Math.max(0, Math.min(1000, ((start - span.from) / width) * 1000));
  const w = Math.max(6, Math.min(1000 - x, ((end - start) / width) * 1000));
  const label = `${formatDuration(end - start)} from ${formatDuration(start - span.from)} after the task started`;
  return html`<svg viewBox="0 0 1000 12" preserveAspectRatio="none" role="img" aria-label="${label}"><rect class="track" x="0" y="5" width="1000" height="2"></rect><rect class="span${step.status === 'failed' ? ' failed' : ''}" x="${x.toFixed(1)}" y="0" width="${w.toFixed(1)}" height="12"></rect></svg>`;
}

/** Lanes the run's chart draws at most; the table below lists every step. */
const CHART_LANES = 60;
const CHART_WIDTH = 1000;
const LABEL_WIDTH = 190;
const LANE_HEIGHT = 20;
const AXIS_HEIGHT = 22;

/**
 * The run on one time axis (SVG): a lane per step, sleep, signal wait and child (its label a link
 * to the child's task), each bar from its start to its end (to now, or to its wake-up, while it
 * waits); a step that took several attempts says so, a failed one is red, and a compensation is a
 * mark where it ran. The `ctx.log` lines the page read (its Logs table) are marks on a lane of
 * their own, at their time, coloured by level, each titled with its level, step and message. The
 * chart is an image with a summary for screen readers; the tables below hold the same facts as text.
 */
export function runTimelineChart(
  task: AgentTask,
  steps: StepSummary[],
  children: AgentTask[],
  logs: readonly RunLogLine[],
  context: ViewContext,
): Html {
  const lanes = steps.filter((step) => step.startedAt || step.createdAt).slice(0, CHART_LANES);
  if (!lanes.length && !logs.length) return html``;
  const now = context.now.getTime();
  const end = (step: StepSummary) =>
    step.completedAt?.getTime() ??
    (step.status === 'waiting' ? Math.min(step.wakeAt?.getTime() ?? now, now) : step.status === 'running' ? now : null);
  const times = lanes.flatMap((step) => [step.startedAt?.getTime(), end(step) ?? undefined, step.compensatedAt?.getTime()]);
  const known = [task.startedAt?.getTime(), task.completedAt?.getTime(), ...times, ...logs.map((line) => line.at.getTime())].filter(
    (time): time is number => typeof time === 'number',
  );
  const from = Math.min(...known);
  const to = Math.max(...known, task.completedAt ? -Infinity : Math.min(now, Math.max(...known) + 1));
  const width = Math.max(1, to - from);
  const plot = CHART_WIDTH - LABEL_WIDTH - 10;
  const x = (time: number) => LABEL_WIDTH + ((time - from) / width) * plot;
  const childOf = new Map(children.map((child) => [child.parentStepKey, child]));
  const height = AXIS_HEIGHT + (lanes.length + (logs.length ? 1 : 0)) * LANE_HEIGHT + 4;
  const rows = lanes.map((step, index) => {
    const y = AXIS_HEIGHT + index * LANE_HEIGHT;
    const start = step.startedAt?.getTime() ?? step.createdAt.getTime();
    const stop = end(step) ?? start;
    const barX = x(start);
    const barW = Math.max(3, x(stop) - barX);
    const cls =
      step.kind === 'child' ? 'c-child' : step.kind === 'sleep' ? 'c-sleep' : step.kind === 'signal' ? 'c-signal' : barClass(step.status);
    const child = step.kind === 'child' ? childOf.get(step.stepKey) : undefined;
    const name = step.stepKey.length > 26 ? `${step.stepKey.slice(0, 25)}…` : step.stepKey;
    const label = child
      ? html`<a href="${context.links.task(child.id)}" aria-label="Child task ${child.id} of step ${step.stepKey}"><text x="4" y="${y + 14}">${name} ↗</text></a>`
      : html`<text x="4" y="${y + 14}">${name}</text>`;
    const attempts =
      step.attempt > 1
        ? html`<text class="tick" x="${Math.min(barX + barW + 4, CHART_WIDTH - 60)}" y="${y + 14}">×${step.attempt}</text>`
        : '';
    const undone = step.compensatedAt
      ? html`<rect class="c-undo" x="${(x(step.compensatedAt.getTime()) - 4).toFixed(1)}" y="${y + 5}" width="8" height="8" transform="rotate(45 ${x(step.compensatedAt.getTime()).toFixed(1)} ${y + 9})"></rect>`
      : '';
    return html`<g>${label}<rect class="${cls}" x="${barX.toFixed(1)}" y="${y + 4}" width="${barW.toFixed(1)}" height="${LANE_HEIGHT - 8}" rx="2"></rect>${attempts}${undone}</g>`;
  });
  return html`<figure class="chart run-chart">
<svg class="run-timeline" viewBox="0 0 ${CHART_WIDTH} ${height}" role="${childOf.size ? 'group' : 'img'}" aria-label="${chartSummary(width, steps, lanes.length, logs.length)}">
<line class="axis" x1="${LABEL_WIDTH}" y1="${AXIS_HEIGHT - 4}" x2="${CHART_WIDTH - 10}" y2="${AXIS_HEIGHT - 4}"></line>
<text class="tick" x="${LABEL_WIDTH}" y="12">0</text>
<text class="tick" x="${LABEL_WIDTH + plot / 2}" y="12" text-anchor="middle">${formatDuration(width / 2)}</text>
<text class="tick" x="${CHART_WIDTH - 10}" y="12" text-anchor="end">${formatDuration(width)}</text>
${rows}
${logLane(logs, AXIS_HEIGHT + lanes.length * LANE_HEIGHT, x)}
</svg>
${chartLegend(logs.length > 0)}
</figure>`;
}

/** What the chart shows, for screen readers (its aria-label). */
function chartSummary(width: number, steps: StepSummary[], lanes: number, logLines: number): string {
  return (
    `The run on a time axis of ${formatDuration(width)}: ${lanes} lane(s)` +
    (steps.length > lanes ? ` (the first ${lanes} of ${steps.length})` : '') +
    `, ${steps.filter((step) => step.attempt > 1).length} retried, ${steps.filter((step) => step.compensatedAt).length} compensated` +
    (logLines ? `, ${logLines} log line(s) (listed under Logs)` : '')
  );
}

function chartLegend(withLogs: boolean): Html {
  return html`<ul class="legend" aria-hidden="true"><li><span class="swatch c-ok"></span>step</li><li><span class="swatch c-bad"></span>failed</li><li><span class="swatch c-run"></span>running</li><li><span class="swatch c-wait"></span>sleep or wait</li><li><span class="swatch c-undo"></span>compensated</li><li>×n attempts</li>${withLogs && html`<li>◆ log line: <span class="swatch c-wait"></span>debug <span class="swatch c-run"></span>info <span class="swatch c-warn"></span>warn <span class="swatch c-bad"></span>error</li>`}</ul>`;
}

/** A title's message is cut here; the Logs table holds it whole. */
const LOG_TITLE_CHARS = 200;

const LOG_LEVEL_CLASS: Record<RunLogLine['level'], string> = { debug: 'c-wait', info: 'c-run', warn: 'c-warn', error: 'c-bad' };

/**
 * The run's log lines (only those the page read) as a lane of small diamonds at their times, each
 * with a `<title>` a pointer shows. Hidden from screen readers: the Logs table lists the same lines.
 */
function logLane(logs: readonly RunLogLine[], y: number, x: (time: number) => number): Html {
  if (!logs.length) return html``;
  const marks = logs.map((line) => {
    const at = x(line.at.getTime());
    const message = line.message.length > LOG_TITLE_CHARS ? `${line.message.slice(0, LOG_TITLE_CHARS)}…` : line.message;
    const where = line.stepKey === null ? 'body' : `step ${line.stepKey} #${line.attempt ?? '?'}`;
    return html`<rect class="log-mark ${LOG_LEVEL_CLASS[line.level] ?? 'c-wait'}" data-seq="${line.seq}" x="${(at - 4).toFixed(1)}" y="${y + 6}" width="8" height="8" transform="rotate(45 ${at.toFixed(1)} ${y + 10})"><title>${line.level} · ${where} · ${message}</title></rect>`;
  });
  return html`<g class="log-lane" aria-hidden="true"><text x="4" y="${y + 14}">ctx.log (${logs.length})</text>${marks}</g>`;
}

function barClass(status: string): string {
  if (status === 'failed') return 'c-bad';
  if (status === 'running') return 'c-run';
  if (status === 'waiting') return 'c-wait';
  return 'c-ok';
}
