import { OpenEventGroup, PublishedEventInfo } from '../../domain/event-options';
import { timeElement } from './format';
import { html, Html } from './html';
import { layout, ViewContext } from './layout';

export interface EventsPageData {
  events: PublishedEventInfo[];
  groups: OpenEventGroup[];
  /** The name the list is narrowed to, if any. */
  name: string | undefined;
}

const PAYLOAD_CHARS = 200;

/** Recent published events with what each started per subscribing workflow, and the debounces and batches still open. */
export function eventsPage(context: ViewContext, data: EventsPageData): Html {
  const { links } = context;
  return layout(context, {
    title: 'Events',
    section: 'events',
    body: html`<h1>Events</h1>
<p class="muted">Events published with <code>workflows.publish</code>, <code>POST /events/:name</code> or <code>duraflow_publish</code>, newest first${data.name && html`, named <code>${data.name}</code> (<a href="${links.events()}">all</a>)`}.</p>
<h2>Open debounces and batches</h2>
${
  data.groups.length
    ? html`<table>
  <thead><tr><th scope="col">Workflow</th><th scope="col">Kind</th><th scope="col">Key</th><th scope="col" class="num">Events</th><th scope="col">Opened</th><th scope="col">Starts</th></tr></thead>
  <tbody>${data.groups.map(
    (group) => html`<tr>
    <td><a href="${links.workflow(group.workflowName)}">${group.workflowName}</a></td>
    <td>${group.mode}${group.sealed && ' (closed, starting)'}</td>
    <td><code>${group.key}</code></td>
    <td class="num">${group.eventCount}</td>
    <td>${timeElement(group.openedAt)}</td>
    <td>${timeElement(group.dueAt)}</td>
  </tr>`,
  )}</tbody>
</table>`
    : html`<p class="panel muted">No debounce or batch is waiting.</p>`
}
<h2>Recent events</h2>
${
  data.events.length
    ? html`<table>
  <thead><tr><th scope="col">Published</th><th scope="col">Name</th><th scope="col">Payload</th><th scope="col">Started</th></tr></thead>
  <tbody>${data.events.map((event) => eventRow(context, event))}</tbody>
</table>`
    : html`<p class="panel muted">No event was published${data.name && html` under this name`} (or they are past their retention).</p>`
}`,
  });
}

function eventRow({ links }: ViewContext, event: PublishedEventInfo): Html {
  const payload = JSON.stringify(event.payload) ?? '';
  return html`<tr id="event-${event.id}">
    <td>${timeElement(event.publishedAt)}</td>
    <td><a href="${links.events({ name: event.name })}"><code>${event.name}</code></a>${event.idempotencyKey && html`<br><small class="muted">key ${event.idempotencyKey}</small>`}</td>
    <td><code>${payload.slice(0, PAYLOAD_CHARS)}${payload.length > PAYLOAD_CHARS && '…'}</code></td>
    <td>${
      event.deliveries.length
        ? html`<ul class="plain">${event.deliveries.map(
            (delivery) =>
              html`<li>${delivery.workflowName}: ${
                delivery.taskId
                  ? html`<a class="mono" href="${links.task(delivery.taskId)}">${delivery.taskId}</a>`
                  : delivery.refusal
                    ? html`<span class="error">refused (<code>${delivery.refusal.code}</code>) ${delivery.refusal.message.slice(0, PAYLOAD_CHARS)}</span>`
                    : html`<span class="muted">waiting in its ${delivery.groupId ? 'debounce or batch' : 'group'}</span>`
              }</li>`,
          )}</ul>`
        : html`<span class="muted">no workflow subscribes</span>`
    }</td>
  </tr>`;
}
