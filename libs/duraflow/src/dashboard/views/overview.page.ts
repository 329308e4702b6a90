import { OVERVIEW_WINDOWS, OverviewWindow, TaskOverview, WorkflowOverview } from '../../domain/task-overview';
import { ChartSeries, durationChart, sparkline, stackedBarChart } from './charts';
import { formatDuration, timeElement } from './format';
import { html, Html } from './html';
import { layout, ViewContext } from './layout';

const WINDOW_NAMES: Record<OverviewWindow, string> = { hour: 'Last hour', day: 'Last day', week: 'Last week' };
const X_LABELS: Record<OverviewWindow, string> = { hour: '1 h ago', day: '24 h ago', week: '7 d ago' };

export function isOverviewWindow(value: unknown): value is OverviewWindow {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(OVERVIEW_WINDOWS, value);
}

/**
 * What the person on call opens first: is anything wrong now, since when, in which workflow.
 * Per window (hour, day, week): the outcomes and durations per interval overall, as charts with
 * their numbers in a table beside them, then one row per workflow with its totals and queue.
 */
export function overviewPage(context: ViewContext, overview: TaskOverview): Html {
  const { links } = context;
  const { overall } = overview;
  const x: [string, string] = [X_LABELS[overview.window], 'now'];
  return layout(context, {
    title: 'Overview',
    section: 'overview',
    body: html`<h1>Overview</h1>
<nav class="windows" aria-label="Time window">
  ${(Object.keys(OVERVIEW_WINDOWS) as OverviewWindow[]).map(
    (window) =>
      html`<a href="${links.overview({ window })}" ${window === overview.window ? html`aria-current="page"` : ''}>${WINDOW_NAMES[window]}</a>`,
  )}
</nav>
<p class="muted">From ${timeElement(overview.from)} to ${timeElement(overview.to)}, in intervals of ${formatDuration(overview.intervalMs)}.
Durations run from a task's start to its end, for the tasks that finished in the interval (cancelled ones left out).</p>
<ul class="counts" aria-label="All workflows, ${WINDOW_NAMES[overview.window].toLowerCase()}">${summaryItems(overall)}</ul>
<h2 id="outcomes">Tasks per interval</h2>
<div class="chart-row">
  ${stackedBarChart({ label: outcomesLabel(overall, overview.window), series: outcomeSeries(overall), line: startedSeries(overall), xLabels: x })}
  ${intervalTable(overall, 'counts')}
</div>
<h2 id="durations">Durations</h2>
<div class="chart-row">
  ${durationChart({ label: durationsLabel(overall, overview.window), series: durationSeries(overall), xLabels: x })}
  ${intervalTable(overall, 'durations')}
</div>
<h2 id="workflows">Workflows</h2>
${
  overview.workflows.length
    ? html`<div class="table-wrap"><table class="workflows">
  <caption class="skip">Per workflow, ${WINDOW_NAMES[overview.window].toLowerCase()}; the queue is now</caption>
  <thead><tr>
    <th scope="col">Workflow</th><th scope="col">Finished per interval</th><th scope="col" class="num">Started</th>
    <th scope="col" class="num">Completed</th><th scope="col" class="num">Failed</th><th scope="col" class="num">Rolled back</th>
    <th scope="col" class="num">Failure rate</th><th scope="col" class="num">p50</th><th scope="col" class="num">p95</th>
    <th scope="col" class="num">Queue</th><th scope="col" class="num">Running</th><th scope="col" class="num">Oldest waiting</th>
  </tr></thead>
  <tbody>${overview.workflows.map((entry) => workflowRow(context, entry, overview.window))}</tbody>
</table></div>`
    : html`<p class="panel muted">No task started or finished in this window, and none is waiting.</p>`
}`,
  });
}

function summaryItems(entry: WorkflowOverview): Html {
  const { totals } = entry;
  const items: Array<[string, string]> = [
    ['Started', String(totals.started)],
    ['Completed', String(totals.completed)],
    ['Failed', String(totals.failed)],
    ['Rolled back', String(totals.rolledBack)],
    ['Failure rate', rate(totals.failureRate)],
    ['p50', formatDuration(totals.p50Ms)],
    ['p95', formatDuration(totals.p95Ms)],
    ['Queue now', String(entry.queueDepth)],
    ['Oldest waiting', formatDuration(entry.oldestRunnableMs)],
  ];
  return html`${items.map(([label, value]) => html`<li class="stat"><span class="muted">${label}</span> <strong>${value}</strong></li>`)}`;
}

function workflowRow(context: ViewContext, entry: WorkflowOverview, window: OverviewWindow): Html {
  const { totals } = entry;
  const name = entry.workflow ?? '';
  return html`<tr>
  <td><a href="${context.links.workflow(name)}"><code>${name}</code></a></td>
  <td>${sparkline(outcomesLabel(entry, window), outcomeSeries(entry))}</td>
  <td class="num">${totals.started}</td><td class="num">${totals.completed}</td><td class="num">${totals.failed}</td>
  <td class="num">${totals.rolledBack}</td><td class="num">${rate(totals.failureRate)}</td>
  <td class="num">${formatDuration(totals.p50Ms)}</td><td class="num">${formatDuration(totals.p95Ms)}</td>
  <td class="num">${entry.queueDepth}</td><td class="num">${entry.running}</td><td class="num">${formatDuration(entry.oldestRunnableMs)}</td>
</tr>`;
}

/** The chart's numbers, one row per interval, in a region that scrolls (and takes the keyboard's focus to do so). */
function intervalTable(entry: WorkflowOverview, kind: 'counts' | 'durations'): Html {
  const label = kind === 'counts' ? 'Tasks per interval, as numbers' : 'Durations per interval, as numbers';
  return html`<div class="table-scroll" tabindex="0" role="region" aria-label="${label}">
<table class="numbers">
  <caption class="skip">${label}</caption>
  <thead><tr><th scope="col">From</th>${
    kind === 'counts'
      ? html`<th scope="col" class="num">Started</th><th scope="col" class="num">Completed</th><th scope="col" class="num">Failed</th><th scope="col" class="num">Rolled back</th><th scope="col" class="num">Cancelled</th>`
      : html`<th scope="col" class="num">Finished</th><th scope="col" class="num">p50</th><th scope="col" class="num">p95</th>`
  }</tr></thead>
  <tbody>${[...entry.intervals]
    .reverse()
    .map(
      (interval) =>
        html`<tr><td>${timeElement(interval.start)}</td>${
          kind === 'counts'
            ? html`<td class="num">${interval.started}</td><td class="num">${interval.completed}</td><td class="num">${interval.failed}</td><td class="num">${interval.rolledBack}</td><td class="num">${interval.cancelled}</td>`
            : html`<td class="num">${interval.completed + interval.failed + interval.rolledBack}</td><td class="num">${formatDuration(interval.p50Ms)}</td><td class="num">${formatDuration(interval.p95Ms)}</td>`
        }</tr>`,
    )}</tbody>
</table>
</div>`;
}

function outcomeSeries(entry: WorkflowOverview): ChartSeries[] {
  return [
    { name: 'completed', cls: 'c-ok', values: entry.intervals.map((interval) => interval.completed) },
    { name: 'failed', cls: 'c-bad', values: entry.intervals.map((interval) => interval.failed) },
    { name: 'rolled back', cls: 'c-undo', values: entry.intervals.map((interval) => interval.rolledBack) },
    { name: 'cancelled', cls: 'c-warn', values: entry.intervals.map((interval) => interval.cancelled) },
  ];
}

function startedSeries(entry: WorkflowOverview): ChartSeries {
  return { name: 'started', cls: 'c-run', values: entry.intervals.map((interval) => interval.started) };
}

function durationSeries(entry: WorkflowOverview): ChartSeries[] {
  return [
    { name: 'p50', cls: 'c-run', values: entry.intervals.map((interval) => interval.p50Ms) },
    { name: 'p95', cls: 'c-warn', values: entry.intervals.map((interval) => interval.p95Ms) },
  ];
}

function outcomesLabel(entry: WorkflowOverview, window: OverviewWindow): string {
  const { totals } = entry;
  const busiest = entry.intervals.reduce(
    (best, interval) => (interval.failed + interval.rolledBack > best.failed + best.rolledBack ? interval : best),
    entry.intervals[0],
  );
  const who = entry.workflow === null ? 'All workflows' : `Workflow ${entry.workflow}`;
  const failures = totals.failed + totals.rolledBack;
  return (
    `${who}, ${WINDOW_NAMES[window].toLowerCase()}: ${totals.started} started, ${totals.completed} completed, ${totals.failed} failed, ` +
    `${totals.rolledBack} rolled back, ${totals.cancelled} cancelled` +
    (failures && busiest ? `; most failures in the interval from ${busiest.start.toISOString()}` : '')
  );
}

function durationsLabel(entry: WorkflowOverview, window: OverviewWindow): string {
  return `Durations per interval, ${WINDOW_NAMES[window].toLowerCase()}: p50 ${formatDuration(entry.totals.p50Ms)} and p95 ${formatDuration(entry.totals.p95Ms)} over the window`;
}

function rate(value: number | null): string {
  return value === null ? '—' : `${(value * 100).toFixed(value && value < 0.1 ? 1 : 0)}%`;
}
