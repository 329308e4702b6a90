import { AgentTask } from '../../domain/entities/agent-task.entity';
import { StepSummary } from '../../domain/task-summaries';
import { BulkAction } from '../dashboard-links';
import { filterQuery, TaskFilters, tagText } from '../task-filters';
import { confirmPage } from './confirm.page';
import { html, Html } from './html';
import { layout, statusBadge, ViewContext } from './layout';

/** A task's retry: what is kept, what runs again. */
export function confirmRetryPage(context: ViewContext, task: AgentTask, steps: StepSummary[]): Html {
  const { links } = context;
  const kept = steps.filter((step) => step.status === 'completed');
  const what = html`<p>Task <code>${task.id}</code> (<code>${task.workflowName}</code>, ${statusBadge(task.status)}) runs again
  <strong>from where it stopped</strong>: ${
    kept.length
      ? html`its ${kept.length} completed step${kept.length > 1 && 's'} (${kept.map((step, i) => html`${i > 0 && ', '}<code>${step.stepKey}</code>`)}) are kept and not run again`
      : 'no step had completed, so it starts from its first step'
  }; the step that failed starts over with all its attempts.</p>
<p>Its error is kept in the task's history; a worker picks the task up at once.</p>`;
  return confirmPage(context, {
    title: 'Retry this task?',
    what,
    action: links.retry(task.id),
    button: 'Retry the task',
    back: links.task(task.id),
    backLabel: 'Back to the task',
  });
}

/** A fork from one step: the steps before it are copied, it and those after run in a new task. */
export function confirmForkPage(context: ViewContext, task: AgentTask, steps: StepSummary[], fromStep: StepSummary): Html {
  const { links } = context;
  const index = steps.findIndex((step) => step.id === fromStep.id);
  const copied = steps.slice(0, Math.max(0, index)).filter((step) => step.status === 'completed');
  const what = html`<p>A <strong>new task</strong> of <code>${task.workflowName}</code> starts from task <code>${task.id}</code>
  (${statusBadge(task.status)}), with the same input and version.</p>
<p>${
    copied.length
      ? html`The ${copied.length} step${copied.length > 1 && 's'} recorded before it (${copied.map((step, i) => html`${i > 0 && ', '}<code>${step.stepKey}</code>`)}) are copied with their outputs and not run again;`
      : 'No step is copied;'
  } step <code>${fromStep.stepKey}</code> and every step after it run anew.</p>
<p>The original task is not changed. You are taken to the new task.</p>`;
  return confirmPage(context, {
    title: `Fork this task from step “${fromStep.stepKey}”?`,
    what,
    action: links.fork(task.id, fromStep.stepKey),
    button: 'Fork the task',
    back: links.task(task.id),
    backLabel: 'Back to the task',
  });
}

const BULK_WORDS: Record<BulkAction, { verb: string; title: string; effect: string }> = {
  cancel: {
    verb: 'cancel',
    title: 'Cancel the tasks that match?',
    effect: 'Pending ones never run; running ones stop before their next step. Completed steps are not undone.',
  },
  retry: {
    verb: 'retry',
    title: 'Retry the tasks that match?',
    effect: 'Each failed (or cancelled, uncompensated) task runs again from where it stopped; its completed steps are kept.',
  },
  resume: {
    verb: 'resume',
    title: 'Resume the held tasks that match?',
    effect: 'Each task the determinism guard holds runs again on the code deployed now.',
  },
};

/** The filters in words, as the confirmation and result pages show them. */
function filterFacts(filters: TaskFilters): Html {
  const facts: Array<[string, string]> = [];
  if (filters.workflow) facts.push(['Workflow', filters.workflow]);
  if (filters.status) facts.push(['Status', filters.status]);
  if (filters.held) facts.push(['Held', 'only the tasks the determinism guard holds']);
  if (filters.from) facts.push(['Created from', filters.from.toISOString()]);
  if (filters.to) facts.push(['Created before', filters.to.toISOString()]);
  if (filters.tags) facts.push(['Tags', tagText(filters.tags)]);
  if (!facts.length) facts.push(['Filter', 'none: every task']);
  return html`<dl class="facts" aria-label="The filter">${facts.map(([label, value]) => html`<div><dt>${label}</dt><dd><code>${value}</code></dd></div>`)}</dl>`;
}

/** A bulk action's confirmation, with the count of its dry run: nothing changes until the button. */
export function confirmBulkPage(context: ViewContext, action: BulkAction, filters: TaskFilters, matched: number): Html {
  const { links } = context;
  const words = BULK_WORDS[action];
  const what = html`${filterFacts(filters)}
<p>It will ${words.verb} <strong data-matched="${matched}">${matched}</strong> task${matched !== 1 && 's'} (counted now; tasks that change
  before you confirm are counted again).</p>
<p>${words.effect} It works in small batches; a task is changed at most once.</p>`;
  return confirmPage(context, {
    title: words.title,
    what,
    action: links.bulk(action, filterQuery(filters, ['cursor'])),
    button: `${words.verb[0].toUpperCase()}${words.verb.slice(1)} ${matched} task${matched !== 1 ? 's' : ''}`,
    back: links.home(filterQuery(filters, ['cursor'])),
    backLabel: 'Back to the list',
  });
}

/** What a bulk action did. */
export function bulkResultPage(
  context: ViewContext,
  action: BulkAction,
  filters: TaskFilters,
  result: { matched: number; changed: number },
): Html {
  const { links } = context;
  return layout(context, {
    title: 'Bulk action done',
    section: 'tasks',
    body: html`<h1>Bulk ${BULK_WORDS[action].verb} done</h1>
<p class="notice" role="status">Matched <strong data-matched="${result.matched}">${result.matched}</strong>, changed
  <strong data-changed="${result.changed}">${result.changed}</strong>.</p>
<div class="panel">${filterFacts(filters)}</div>
<p class="actions"><a class="button secondary" href="${links.home(filterQuery(filters, ['cursor']))}">Back to the list</a></p>`,
  });
}
