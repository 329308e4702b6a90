import { AgentTask } from '../../domain/entities/agent-task.entity';
import { DeadLetter } from '../../domain/entities/dead-letter.entity';
import { StepSummary } from '../../domain/task-summaries';
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
