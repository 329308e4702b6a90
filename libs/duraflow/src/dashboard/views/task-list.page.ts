import { AgentTask } from '../../domain/entities/agent-task.entity';
import { TaskStatus } from '../../domain/task-status';
import { TaskCounts } from '../../domain/task-summaries';
import { BulkAction } from '../dashboard-links';
import { filterQuery, TaskFilters, tagText } from '../task-filters';
import { durationBetween, formatDuration, timeElement, timeOfDayElement, toDateTimeLocal } from './format';
import { html, Html } from './html';
import { isHeld } from '../../domain/task-status';
import { layout, statusBadge, ViewContext } from './layout';

export interface TaskListData {
  filters: TaskFilters;
  /** What could not be read or was refused, as messages for the operator. */
  problems: string[];
  counts: TaskCounts | undefined;
  /** How many of the pending ones the determinism guard holds (same filters but status). */
  heldCount: number | undefined;
  tasks: AgentTask[];
  nextCursor: string | null;
  /** The workflows this process registers, offered in the workflow field. */
  workflows: string[];
}

const PRESETS: Array<[string, number]> = [
  ['15 minutes', 15 * 60_000],
  ['hour', 3_600_000],
  ['day', 86_400_000],
  ['week', 7 * 86_400_000],
];

export function taskListPage(context: ViewContext, data: TaskListData): Html {
  const { links, now } = context;
  const { filters } = data;
  return layout(context, {
    title: 'Tasks',
    section: 'tasks',
    body: html`<h1>Tasks</h1>
<form class="filters" method="get" action="${links.home()}" role="search" aria-label="Filter tasks">
  <label>Status
    <select name="status">
      <option value="">any</option>
      ${Object.values(TaskStatus).map((status) => html`<option value="${status}" ${filters.status === status && html`selected`}>${status.replace(/_/g, ' ')}</option>`)}
    </select>
  </label>
  <label class="check"><input type="checkbox" name="held" value="true" ${filters.held && html`checked`}> Held only</label>
  <label>Workflow <input name="workflow" list="workflow-names" value="${filters.workflow ?? ''}" autocomplete="off"></label>
  <datalist id="workflow-names">${data.workflows.map((name) => html`<option value="${name}"></option>`)}</datalist>
  <label>Created from (UTC) <input type="datetime-local" step="1" name="from" value="${toDateTimeLocal(filters.from)}"></label>
  <label>Created before (UTC) <input type="datetime-local" step="1" name="to" value="${toDateTimeLocal(filters.to)}"></label>
  <label>Tags <input name="tag" value="${filters.tags ? tagText(filters.tags) : ''}" placeholder="tenant:acme region:eu" spellcheck="false"></label>
  <label>Task id <input name="id" value="" placeholder="7c9e6679-7425-40de-944b-e07fc1f90ae7" spellcheck="false"></label>
  <button type="submit">Filter</button>
  <a href="${links.home()}">Clear</a>
</form>
<p class="presets">Created in the last
  ${PRESETS.map(([label, ms], index) => html`${index > 0 && ' · '}<a href="${links.home({ ...filterQuery(filters, ['cursor', 'to']), from: new Date(now.getTime() - ms).toISOString() })}">${label}</a>`)}
</p>
${data.problems.map((problem) => html`<p class="notice error" role="alert">${problem}</p>`)}
${data.counts && countsList(context, filters, data.counts, data.heldCount ?? 0)}
${bulkActions(context, filters)}
${taskTable(context, data.tasks)}
<nav class="pager" aria-label="Pages">
  ${filters.cursor && html`<a href="${links.home(filterQuery(filters, ['cursor']))}">← Newest</a>`}
  ${data.nextCursor && html`<a href="${links.home({ ...filterQuery(filters), cursor: data.nextCursor })}">Older tasks →</a>`}
</nav>`,
  });
}

/** Counts by status for the other filters; each one a link that adds its status to them. */
function countsList(context: ViewContext, filters: TaskFilters, counts: TaskCounts, held: number): Html {
  const { links } = context;
  const total = Object.values(counts).reduce((sum, count) => sum + count, 0);
  const base = filterQuery(filters, ['cursor', 'status', 'held']);
  return html`<ul class="counts" aria-label="Tasks by status">
  <li><a href="${links.home(base)}" aria-current="${filters.status === undefined && !filters.held}" data-status="all"><span>all</span> <strong>${total}</strong></a></li>
  ${(Object.keys(counts) as TaskStatus[]).map(
    (status) =>
      html`<li><a href="${links.home({ ...base, status })}" aria-current="${filters.status === status && !filters.held}" data-status="${status}">${statusBadge(status)} <strong>${counts[status]}</strong></a></li>`,
  )}
  <li><a href="${links.home({ ...base, held: 'true' })}" title="Pending tasks the determinism guard holds: resume or cancel them" aria-current="${filters.held === true}" data-status="held">${statusBadge('held')} <strong>${held}</strong></a></li>
</ul>`;
}

/**
 * Actions on every task the filters match (each through a confirmation page that counts them
 * first), offered once a filter narrows the list; `held` narrows it to what resume changes.
 */
function bulkActions(context: ViewContext, filters: TaskFilters): Html {
  if (!filters.status && !filters.workflow && !filters.from && !filters.to && !filters.held && !filters.tags) return html``;
  const { links } = context;
  const query = filterQuery(filters, ['cursor']);
  const actions: BulkAction[] = filters.held ? ['resume'] : ['cancel', 'retry', 'resume'];
  return html`<p class="actions bulk" aria-label="Act on every task these filters match">Every task matching these filters:
  ${actions.map((action) => html`<a class="button secondary" href="${links.bulk(action, query)}">${action[0].toUpperCase()}${action.slice(1)} all…</a>`)}
</p>`;
}

function taskTable(context: ViewContext, tasks: AgentTask[]): Html {
  if (!tasks.length) return html`<p class="panel muted">No task matches these filters.</p>`;
  const { links, now } = context;
  return html`<table>
  <thead><tr>
    <th scope="col">Task</th><th scope="col">Workflow</th><th scope="col">Status</th><th scope="col">Created</th>
    <th scope="col">Started</th><th scope="col">Finished</th><th scope="col" class="num">Duration</th><th scope="col" class="num">Recoveries</th>
  </tr></thead>
  <tbody>${tasks.map(
    (task) => html`<tr>
    <td><a class="mono" href="${links.task(task.id)}">${task.id}</a></td>
    <td><code>${task.workflowName}</code>${tagChips(context, task.tags)}</td>
    <td>${statusBadge(task.status)}${isHeld(task) && html` ${statusBadge('held')}`}${task.error?.code && html` <code class="muted">${task.error.code}</code>`}</td>
    <td>${timeElement(task.createdAt)}</td>
    <td>${timeOfDayElement(task.startedAt, task.createdAt)}</td>
    <td>${timeOfDayElement(task.completedAt, task.createdAt)}</td>
    <td class="num">${formatDuration(durationBetween(task.startedAt, task.completedAt, now))}</td>
    <td class="num">${task.retryCount ?? 0}</td>
  </tr>`,
  )}</tbody>
</table>`;
}

/** A task's tags as chips, each a link to the tasks holding that tag. */
export function tagChips(context: ViewContext, tags: Record<string, string> | undefined): Html {
  const entries = Object.entries(tags ?? {});
  if (!entries.length) return html``;
  return html` <span class="tags">${entries.map(
    ([key, value]) => html`<a class="tag" href="${context.links.home({ tag: `${key}:${value}` })}"><code>${key}:${value}</code></a> `,
  )}</span>`;
}
