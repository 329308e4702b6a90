import { ScheduleInfo } from '../../domain/schedule-options';
import { WorkflowDescription } from '../../services/workflows/workflow-insights';
import { ScheduleAction } from '../dashboard-links';
import { confirmPage } from './confirm.page';
import { formatDuration, timeElement } from './format';
import { html, Html } from './html';
import { layout, statusBadge, ViewContext } from './layout';

/** What a schedule action reports after its redirect (`?notice=`): fixed texts, so a link cannot put words on the page. */
export const WORKFLOW_NOTICES = {
  'schedule-paused': 'The schedule is paused on every node: its ticks start no task until it is resumed.',
  'schedule-resumed': 'The schedule ticks again from its next tick (the ticks while it was paused are not caught up).',
} as const;

export type WorkflowNotice = keyof typeof WORKFLOW_NOTICES;

export function isWorkflowNotice(value: unknown): value is WorkflowNotice {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(WORKFLOW_NOTICES, value);
}

/** One registered workflow: its versions and who runs them, its steps, its limits, its schedules. */
export function workflowPage(context: ViewContext, workflow: WorkflowDescription, notice: WorkflowNotice | undefined): Html {
  const { links } = context;
  return layout(context, {
    title: `Workflow ${workflow.name}`,
    section: 'overview',
    body: html`<p><a href="${links.overview()}">← Overview</a></p>
${notice && html`<p class="notice" role="status">${WORKFLOW_NOTICES[notice]}</p>`}
<h1><span>Workflow <code>${workflow.name}</code></span></h1>
<div class="actions"><a class="button secondary" href="${links.home({ workflow: workflow.name })}">Its tasks</a></div>
<h2 id="versions">Versions</h2>
<table>
  <caption class="skip">The workflow's versions, newest first, with their unfinished tasks and the workers running them now</caption>
  <thead><tr><th scope="col">Version</th><th scope="col">This node</th><th scope="col" class="num">Pending</th><th scope="col" class="num">Running</th><th scope="col" class="num">Held</th><th scope="col">Running on</th></tr></thead>
  <tbody>${workflow.versions.map(
    (version) => html`<tr>
    <td>v${version.version}</td>
    <td>${version.registeredHere ? 'registered' : html`<span class="muted">not registered: its tasks wait for a node that has it</span>`}</td>
    <td class="num">${version.pending}</td><td class="num">${version.running}</td><td class="num">${version.held}</td>
    <td>${version.workers.length ? version.workers.map((worker, i) => html`${i > 0 && ', '}<code>${worker}</code>`) : html`<span class="muted">—</span>`}</td>
  </tr>`,
  )}</tbody>
</table>
${stepsAndLimits(workflow)}
<h2 id="schedules">Schedules</h2>
${
  workflow.schedules.length
    ? html`<table>
  <thead><tr><th scope="col">Schedule</th><th scope="col">Cron</th><th scope="col">State</th><th scope="col">Next tick</th><th scope="col">Last tick</th><th scope="col">Last task</th><th scope="col">Actions</th></tr></thead>
  <tbody>${workflow.schedules.map((schedule) => scheduleRow(context, workflow.name, schedule))}</tbody>
</table>`
    : html`<p class="panel muted">No schedule starts it.</p>`
}
${subscriptionsSection(workflow)}`,
  });
}

function stepsAndLimits(workflow: WorkflowDescription): Html {
  return html`<h2 id="steps">Steps</h2>
${
  workflow.steps.length
    ? html`<p class="muted">As its newest runs recorded them (at most 500 tasks of the last 7 days); durations of the completed ones.</p>
<table>
  <thead><tr><th scope="col">Step</th><th scope="col" class="num">Runs</th><th scope="col" class="num">Failed</th><th scope="col" class="num">Retried</th><th scope="col" class="num">p50</th><th scope="col" class="num">p95</th></tr></thead>
  <tbody>${workflow.steps.map(
    (step) => html`<tr>
    <td><code>${step.stepKey}</code>${step.kind && html` <span class="muted">${step.kind}</span>`}</td>
    <td class="num">${step.runs}</td><td class="num">${step.failed}</td><td class="num">${step.retried}</td>
    <td class="num">${formatDuration(step.p50Ms)}</td><td class="num">${formatDuration(step.p95Ms)}</td>
  </tr>`,
  )}</tbody>
</table>`
    : html`<p class="panel muted">No run of it in the last 7 days.</p>`
}
<h2 id="limits">Limits</h2>
${
  workflow.limits.length
    ? html`<table>
  <thead><tr><th scope="col">Limit</th><th scope="col">Key</th><th scope="col" class="num">In use</th><th scope="col" class="num">Limit</th><th scope="col" class="num">Waiting</th></tr></thead>
  <tbody>${workflow.limits.map(
    (limit) => html`<tr>
    <td>${limit.kind}</td><td>${limit.key === undefined ? html`<span class="muted">—</span>` : html`<code>${limit.key}</code>`}</td>
    <td class="num">${limit.running}</td><td class="num">${limit.limit}</td><td class="num">${limit.waiting}</td>
  </tr>`,
  )}</tbody>
</table>`
    : html`<p class="panel muted">No concurrency or rate limit.</p>`
}`;
}

/** The events that start it; no section when none does. */
function subscriptionsSection(workflow: WorkflowDescription): Html {
  if (!workflow.subscriptions.length) return html``;
  return html`<h2 id="subscriptions">Events that start it</h2>
<table>
  <thead><tr><th scope="col">Event</th><th scope="col">Mode</th><th scope="col">Settings</th></tr></thead>
  <tbody>${workflow.subscriptions.map(
    (entry) => html`<tr>
    <td><code>${entry.eventName}</code></td><td>${entry.mode}</td>
    <td>${
      entry.mode === 'debounce'
        ? `quiet period ${formatDuration(entry.periodMs)}${entry.maxWaitMs ? `, at most ${formatDuration(entry.maxWaitMs)}` : ''}`
        : entry.mode === 'batch'
          ? `up to ${entry.maxSize ?? '—'} events or ${formatDuration(entry.timeoutMs)}`
          : 'one task per event'
    }</td>
  </tr>`,
  )}</tbody>
</table>`;
}

function scheduleRow(context: ViewContext, workflow: string, schedule: ScheduleInfo): Html {
  const { links } = context;
  const action = (name: ScheduleAction, label: string, secondary: boolean) =>
    html`<a class="button${secondary ? ' secondary' : ''}" href="${links.schedule(workflow, schedule.name, name)}">${label}</a>`;
  return html`<tr id="schedule-${schedule.name}">
  <td><code>${schedule.name}</code></td>
  <td><code>${schedule.cron}</code> <span class="muted">${schedule.timezone}</span></td>
  <td>${schedule.pausedAt ? html`${statusBadge('paused')} since ${timeElement(schedule.pausedAt)}` : statusBadge('active')}</td>
  <td>${schedule.pausedAt ? html`<span class="muted">none while paused</span>` : timeElement(schedule.nextTickAt)}</td>
  <td>${timeElement(schedule.lastTickAt)}</td>
  <td>${
    schedule.lastTask
      ? html`<a class="mono" href="${links.task(schedule.lastTask.id)}">${schedule.lastTask.id}</a>${schedule.lastTask.status && html` ${statusBadge(schedule.lastTask.status)}`}`
      : html`<span class="muted">—</span>`
  }</td>
  <td><div class="actions">
    ${schedule.pausedAt ? action('resume', 'Resume…', false) : action('pause', 'Pause…', true)}
    ${action('trigger', 'Trigger now…', true)}
  </div></td>
</tr>`;
}

const CONFIRM: Record<ScheduleAction, { title: string; what: string; button: string }> = {
  pause: {
    title: 'Pause this schedule?',
    what: 'No node starts its ticks until it is resumed; the ticks that fall due meanwhile are recorded as done and are not caught up. Tasks it already started go on.',
    button: 'Pause the schedule',
  },
  resume: {
    title: 'Resume this schedule?',
    what: 'It ticks again from its next tick on every node; the ticks missed while it was paused are not started.',
    button: 'Resume the schedule',
  },
  trigger: {
    title: 'Start this schedule’s task now?',
    what: 'One task of its workflow starts now with the schedule’s input, outside its ticks (its next tick still starts one).',
    button: 'Start the task now',
  },
};

export function confirmSchedulePage(context: ViewContext, workflow: string, schedule: ScheduleInfo, action: ScheduleAction): Html {
  const { links } = context;
  const text = CONFIRM[action];
  return confirmPage(context, {
    title: text.title,
    what: html`<p>Schedule <code>${schedule.name}</code> (<code>${schedule.cron}</code>, ${schedule.timezone}) of workflow <code>${workflow}</code>.</p>
<p>${text.what}</p>`,
    action: links.schedule(workflow, schedule.name, action),
    button: text.button,
    back: links.workflow(workflow),
    backLabel: 'Back to the workflow',
  });
}
