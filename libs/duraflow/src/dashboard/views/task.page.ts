import { AgentTask } from '../../domain/entities/agent-task.entity';
import { DeadLetter } from '../../domain/entities/dead-letter.entity';
import { isTerminalStatus, TaskStatus } from '../../domain/task-status';
import { StepSummary } from '../../domain/task-summaries';
import { TaskSignal } from '../../persistence/signal.store';
import { RunLogPage } from '../../services/workflows/run-log-reader';
import { effectKey } from '../../util/effect-key';
import { durationBetween, formatDuration, timeElement } from './format';
import { html, Html, HtmlValue } from './html';
import { isHeld } from '../../domain/task-status';
import { layout, statusBadge, ViewContext } from './layout';
import { forkFact, historySection } from './task-history';
import { logsSection } from './task-logs';
import { talkSection } from './task-events';
import { callbacksSection } from './task-callbacks';
import { CallbackInfo } from '../../services/workflows/task-callbacks';
import { RunTalkOverview } from '../../services/workflows/run-talk-overview';
import { tagChips } from './task-list.page';
import { runTimelineChart, timelineEntries, timelineTable } from './timeline';
import { errorBlock, previewOf, valueBlock } from './values';

/** Everything a task's page shows, read through the public services. */
export interface TaskDetails {
  task: AgentTask;
  steps: StepSummary[];
  deadLetters: DeadLetter[];
  /** The tasks it started with ctx.startChild / ctx.runChild. */
  children: AgentTask[];
  /** One page of the signals sent to it, in the order they were sent, with previews of their payloads only. */
  signals: TaskSignal[];
  /** The cursor this page of signals starts after (none: the first page). */
  signalsAfter?: string;
  /** The cursor of the next page of signals; null on the last page. */
  signalsNext: string | null;
  /** The first page of the lines the run kept with `ctx.log`. */
  logs: RunLogPage;
  /** The run's events (latest values) and streams (their last chunks). */
  talk: RunTalkOverview;
  /** The callbacks its runs opened (the open ones with their urls). */
  callbacks: CallbackInfo[];
  /** Fingerprint of the task's progress when it was read: live updates compare against it. */
  version: string;
}

/** What an action reports after its redirect (`?notice=`): fixed texts, so a link cannot put words on the page. */
export const TASK_NOTICES = {
  cancelled: 'The task was cancelled.',
  'cancelled-compensated': 'The task was cancelled and its completed steps were compensated (failures went to the dead-letter queue).',
  retried: 'The compensation ran again and succeeded: the dead letter is resolved.',
  'retry-failed': 'The compensation failed again: the dead letter stays, with the new error and one more retry counted.',
  discarded: 'The dead letter was discarded: its compensation was not run.',
  signalled: 'The signal was sent: the task takes it at its next wait for that name.',
  resumed:
    'The hold was cleared: a worker runs the task again on the code deployed now. If it still takes another path than the one it recorded, it is held again.',
  'task-retried': 'The task runs again from where it stopped: its completed steps are kept, its last error is in its history.',
  'callback-completed': 'The callback was completed: the run takes its body at its wait for it.',
  forked: 'This task was forked: the steps before its first step to run anew were copied from the original, and it runs from there.',
} as const;

export type TaskNotice = keyof typeof TASK_NOTICES;

export function isTaskNotice(value: unknown): value is TaskNotice {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(TASK_NOTICES, value);
}

export function taskPage(context: ViewContext, details: TaskDetails, notice: TaskNotice | undefined): Html {
  const { task } = details;
  const { links } = context;
  const live = !isTerminalStatus(task.status);
  return layout(context, {
    title: `${task.workflowName} ${task.id}`,
    section: 'tasks',
    body: html`<p><a href="${links.home()}">← Tasks</a></p>
${notice && html`<p class="notice" role="status">${TASK_NOTICES[notice]}</p>`}
<div id="live" data-version="${details.version}" ${live && html`data-events="${links.taskEvents(task.id)}" data-fragment="${links.taskLive(task.id, { signals: details.signalsAfter })}"`}>
${taskLiveContent(context, details)}
</div>
<p class="live" id="live-state" role="status" aria-live="polite">${live ? 'Live updates need JavaScript; reload to see progress.' : ''}</p>`,
  });
}

/** The part of a task's page that live updates replace (served alone as a fragment). */
export function taskLiveContent(context: ViewContext, details: TaskDetails): Html {
  const { task, steps, deadLetters, children } = details;
  const { links, options } = context;
  const entries = timelineEntries(steps, deadLetters);
  return html`<h1><span>Task <code>${task.id}</code></span> ${statusBadge(task.status)}${isHeld(task) && html` ${statusBadge('held')}`}</h1>
${
  !isTerminalStatus(task.status) &&
  html`<div class="actions">
  ${isHeld(task) && html`<a class="button" href="${links.resume(task.id)}">Resume…</a>`}
  <a class="button${isHeld(task) && ' secondary'}" href="${links.cancel(task.id, false)}">Cancel…</a>
  <a class="button secondary" href="${links.cancel(task.id, true)}">Cancel and compensate…</a>
  <a class="button secondary" href="${links.signal(task.id)}">Send a signal…</a>
</div>`
}
${isRetryable(task) && html`<div class="actions"><a class="button" href="${links.retry(task.id)}">Retry…</a></div>`}
<section class="panel" aria-label="Task facts">
  <dl class="facts">${[...taskFacts(task, steps, deadLetters, context.now), ...forkFact(context, task), ...waitFacts(context, task, steps)].map(([label, value]) => html`<div><dt>${label}</dt><dd>${value}</dd></div>`)}</dl>
  ${task.error && html`<h2>Error</h2>${errorBlock(task.error as unknown as Record<string, unknown>, 'task-stack', links.taskValue(task.id, 'error'), options.previewChars)}`}
</section>
<h2>Input and output</h2>
<div class="values panel">
  ${valueBlock({ id: 'task-input', label: 'input', preview: previewOf(task.input, options.previewChars), href: links.taskValue(task.id, 'input') })}
  ${valueBlock({ id: 'task-output', label: 'output', preview: previewOf(task.output, options.previewChars), href: links.taskValue(task.id, 'output') })}
</div>
<h2>Steps (${steps.length})</h2>
${runTimelineChart(task, steps, children, details.logs.items, context)}
${timelineTable(task, entries, context)}
${logsSection(details.logs)}
${talkSection(details.talk, options.previewChars)}
${callbacksSection(context, task.id, details.callbacks)}
${startedStepsSection(task, steps)}
${historySection(context, task)}
${childrenSection(context, children)}
${signalsSection(context, details)}
${compensationsSection(steps, deadLetters)}
${deadLettersSection(context, task, steps, deadLetters)}`;
}

/** Retry's statuses: failed, and cancelled (a cancel that compensated ends rolled_back); the library has the last word. */
function isRetryable(task: AgentTask): boolean {
  return task.status === TaskStatus.FAILED || task.status === TaskStatus.CANCELLED;
}

/** Its tags, its parent, and what it waits for now (a sleep, a signal, a child), when it does. */
function waitFacts(context: ViewContext, task: AgentTask, steps: StepSummary[]): Array<[string, HtmlValue]> {
  const facts: Array<[string, HtmlValue]> = [];
  if (Object.keys(task.tags ?? {}).length) facts.push(['Tags', tagChips(context, task.tags)]);
  if (task.parentTaskId) {
    facts.push([
      'Parent',
      html`<a href="${context.links.task(task.parentTaskId)}"><code>${task.parentTaskId}</code></a> (step <code>${task.parentStepKey}</code>)`,
    ]);
  }
  const waiting = steps.find((step) => step.status === 'waiting');
  if (waiting && task.status === 'pending') {
    const until = waiting.wakeAt ? html` until ${timeElement(waiting.wakeAt)}` : '';
    facts.push(['Waiting', html`${waiting.kind ?? 'wait'} <code>${waiting.stepKey}</code>${until} (holds no worker slot)`]);
  }
  return facts;
}

function childrenSection(context: ViewContext, children: AgentTask[]): Html {
  if (!children.length) return html``;
  return html`<h2>Children (${children.length})</h2>
<table>
  <thead><tr><th scope="col">Step</th><th scope="col">Task</th><th scope="col">Workflow</th><th scope="col">Status</th><th scope="col">Created</th></tr></thead>
  <tbody>${children.map(
    (child) => html`<tr>
    <td><code>${child.parentStepKey}</code></td>
    <td><a href="${context.links.task(child.id)}"><code>${child.id}</code></a></td>
    <td><code>${child.workflowName}</code></td><td>${statusBadge(child.status)}</td><td>${timeElement(child.createdAt)}</td>
  </tr>`,
  )}</tbody>
</table>`;
}

/** One page of the signals, each payload's preview cut in the database, with links to the first and the next page. */
function signalsSection(context: ViewContext, details: TaskDetails): Html {
  const { task, signals, signalsAfter, signalsNext } = details;
  if (!signals.length && !signalsAfter) return html``;
  const pages = html`<p>${signalsAfter && html`<a href="${context.links.task(task.id)}">← First signals</a> `}${
    signalsNext && html`<a href="${context.links.task(task.id, { signals: signalsNext })}">Later signals →</a>`
  }</p>`;
  return html`<h2>Signals (${signals.length}${(signalsAfter || signalsNext) && ' on this page'})</h2>
<table>
  <thead><tr><th scope="col">Sent</th><th scope="col">Name</th><th scope="col">Payload</th><th scope="col">Taken by</th></tr></thead>
  <tbody>${signals.map(
    (signal) => html`<tr>
    <td>${timeElement(signal.createdAt)}</td><td><code>${signal.name}</code></td>
    <td><code>${signal.payloadPreview ?? 'null'}</code>${signal.payloadBytes > (signal.payloadPreview?.length ?? 0) && html` <span class="muted">(${signal.payloadBytes} bytes)</span>`}</td>
    <td>${signal.consumedByStep ? html`<code>${signal.consumedByStep}</code> at ${timeElement(signal.consumedAt)}` : html`<span class="muted">kept for a wait</span>`}</td>
  </tr>`,
  )}</tbody>
</table>
${(signalsAfter || signalsNext) && pages}`;
}

/** The task's facts, in order; the workflow version joins them when versioned workflows land. */
function taskFacts(task: AgentTask, steps: StepSummary[], deadLetters: DeadLetter[], now: Date): Array<[string, HtmlValue]> {
  const completed = steps.filter((step) => step.status === 'completed').length;
  const compensated = steps.filter((step) => step.compensatedAt).length;
  return [
    ['Workflow', html`<code>${task.workflowName}</code> <span class="muted">v${task.workflowVersion ?? 1}</span>`],
    [
      'Status',
      html`${statusBadge(task.status)}${task.rollbackReason && html` <span class="muted">(rollback: ${task.rollbackReason})</span>`}${
        isHeld(task) &&
        html` <span class="muted">(held by the determinism guard since ${timeElement(task.heldAt)}: resume it after a fixed deploy)</span>`
      }`,
    ],
    ['Progress', `${completed} of ${steps.length} steps completed · ${compensated} compensated · ${deadLetters.length} dead letters`],
    ['Created', timeElement(task.createdAt)],
    ['Started', timeElement(task.startedAt)],
    ['Finished', timeElement(task.completedAt)],
    ['Duration', formatDuration(durationBetween(task.startedAt, task.completedAt, now))],
    ['Scheduled at', timeElement(task.scheduledAt)],
    ['Recoveries', `${task.retryCount ?? 0} of ${task.maxRetries ?? 0}`],
    ['Priority', String(task.priority ?? 0)],
    ['Worker', task.workerId ? html`<code>${task.workerId}</code>` : html`<span class="muted">—</span>`],
    ['Last heartbeat', timeElement(task.heartbeatAt)],
    ['Idempotency key', task.idempotencyKey ? html`<code>${task.idempotencyKey}</code>` : html`<span class="muted">—</span>`],
  ];
}

/** Steps written `running` before their body (`recordStart`) and not finished: their effect keys, to look up at the provider after a crash. */
function startedStepsSection(task: AgentTask, steps: StepSummary[]): Html {
  const started = steps.filter((step) => step.status === 'running' && !step.kind);
  if (!started.length) return html``;
  return html`<h2 id="started-never-finished">Started, never finished (${started.length})</h2>
<table>
  <thead><tr><th scope="col">Step</th><th scope="col">Started</th><th scope="col" class="num">Attempt</th><th scope="col">Effect key</th></tr></thead>
  <tbody>${started.map(
    (step) => html`<tr>
    <td><code>${step.stepKey}</code> <span class="badge s-running">started, never finished</span></td><td>${timeElement(step.startedAt)}</td>
    <td class="num">${step.attempt}</td><td><code>${effectKey(task.id, step.stepKey)}</code></td>
  </tr>`,
  )}</tbody>
</table>`;
}

/** The undos in the order they ran (then those that failed or are still to run). */
function compensationsSection(steps: StepSummary[], deadLetters: DeadLetter[]): Html {
  const compensable = steps.filter((step) => step.status === 'completed' && step.compensationFn);
  if (!compensable.some((step) => step.compensatedAt) && !deadLetters.length) return html``;
  const deadLettered = new Set(deadLetters.map((entry) => entry.stepId));
  const undoneAt = (step: StepSummary) => step.compensatedAt?.getTime() ?? Infinity;
  // Times to the millisecond can tie; a rollback undoes the later-completed step first.
  const sorted = [...compensable].sort((a, b) => undoneAt(a) - undoneAt(b) || (b.completionSeq ?? 0) - (a.completionSeq ?? 0));
  return html`<h2>Compensations</h2>
<table>
  <thead><tr><th scope="col" class="num">#</th><th scope="col">Step</th><th scope="col">Compensation</th><th scope="col">Outcome</th><th scope="col">Undone at</th></tr></thead>
  <tbody>${sorted.map(
    (step, index) => html`<tr>
    <td class="num">${index + 1}</td><td><code>${step.stepKey}</code></td><td><code>${step.compensationFn}</code></td>
    <td>${step.compensatedAt ? statusBadge('compensated') : deadLettered.has(step.id) ? html`${statusBadge('failed')} in the dead-letter queue` : html`<span class="muted">not undone</span>`}</td>
    <td>${timeElement(step.compensatedAt)}</td>
  </tr>`,
  )}</tbody>
</table>`;
}

function deadLettersSection(context: ViewContext, task: AgentTask, steps: StepSummary[], deadLetters: DeadLetter[]): Html {
  if (!deadLetters.length) return html``;
  const { links, options } = context;
  const stepKeys = new Map(steps.map((step) => [step.id, step.stepKey]));
  return html`<h2>Dead letters (${deadLetters.length})</h2>
<table>
  <thead><tr><th scope="col">Created</th><th scope="col">Step</th><th scope="col">Error</th><th scope="col" class="num">Retries</th><th scope="col">Actions</th></tr></thead>
  <tbody>${deadLetters.map(
    (entry) => html`<tr id="dead-letter-${entry.id}">
    <td>${timeElement(entry.createdAt)}</td>
    <td><code>${stepKeys.get(entry.stepId) ?? entry.stepId}</code></td>
    <td>${errorBlock(entry.error, `dead-letter-${entry.id}-stack`, undefined, options.previewChars)}</td>
    <td class="num">${entry.retryCount ?? 0}</td>
    <td><div class="actions">
      <a class="button" href="${links.deadLetter(task.id, entry.id, 'retry')}">Retry…</a>
      <a class="button secondary" href="${links.deadLetter(task.id, entry.id, 'discard')}">Discard…</a>
    </div></td>
  </tr>`,
  )}</tbody>
</table>`;
}
