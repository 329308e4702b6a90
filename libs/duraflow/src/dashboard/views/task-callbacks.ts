import { AgentTask } from '../../domain/entities/agent-task.entity';
import { CallbackInfo } from '../../services/workflows/task-callbacks';
import { timeElement } from './format';
import { html, Html } from './html';
import { layout, statusBadge, ViewContext } from './layout';

/** Where the form that completes callback `callbackId` of task `taskId` is (GET) and posts (POST). */
export function callbackFormHref(context: ViewContext, taskId: string, callbackId: string): string {
  return `${context.links.task(taskId)}/callbacks/${encodeURIComponent(callbackId)}`;
}

/**
 * The run's callbacks (`ctx.createCallback`): each open one with its url to copy (whoever holds it
 * can complete it: show it to operators only) and the form an operator completes it with.
 */
export function callbacksSection(context: ViewContext, taskId: string, callbacks: CallbackInfo[]): Html {
  if (!callbacks.length) return html``;
  return html`<h2>Callbacks (${callbacks.length})</h2>
<table aria-label="Callbacks">
  <thead><tr><th scope="col">Key</th><th scope="col">Status</th><th scope="col">Expires</th><th scope="col">Url</th><th scope="col">Actions</th></tr></thead>
  <tbody>${callbacks.map(
    (callback) => html`<tr id="callback-${callback.id}">
    <td><code>${callback.key}</code></td>
    <td>${statusBadge(callback.status)}${callback.completedAt && html` ${timeElement(callback.completedAt)}`}</td>
    <td>${callback.expiresAt ? timeElement(callback.expiresAt) : html`<span class="muted">never</span>`}</td>
    <td>${
      callback.url
        ? html`<input class="callback-url" readonly aria-label="Url of callback ${callback.key}" size="40" value="${callback.url}">`
        : html`<span class="muted">—</span>`
    }</td>
    <td>${callback.status === 'open' && html`<a class="button secondary" href="${callbackFormHref(context, taskId, callback.id)}">Complete…</a>`}</td>
  </tr>`,
  )}</tbody>
</table>`;
}

/** The form that completes an open callback as a POST to its url would: its JSON body, posted to the same address. */
export function callbackFormPage(context: ViewContext, task: AgentTask, callback: CallbackInfo, problem?: string, payload = ''): Html {
  const { links } = context;
  return layout(context, {
    title: 'Complete a callback',
    section: 'tasks',
    body: html`<div class="confirm">
<h1>Complete callback <code>${callback.key}</code> of task <code>${task.id}</code></h1>
${problem && html`<p class="notice" role="alert">${problem}</p>`}
<div class="panel"><p>The body is what the run's <code>ctx.waitForCallback</code> returns, as if it had been POSTed to the callback's url.
  Only the first completion counts: a POST to the url after this one gets 409.</p></div>
<form method="post" action="${callbackFormHref(context, task.id, callback.id)}">
  <p><label>Body (JSON)<br><textarea name="payload" rows="6" cols="60" required>${payload}</textarea></label></p>
  <div class="actions">
    <button type="submit">Complete the callback</button>
    <a class="button secondary" href="${links.task(task.id)}">Back to the task</a>
  </div>
</form>
</div>`,
  });
}
