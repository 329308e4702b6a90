import { DeadLetter } from '../../domain/entities/dead-letter.entity';
import { timeElement } from './format';
import { html, Html } from './html';
import { layout, ViewContext } from './layout';

export interface DeadLetterListData {
  items: DeadLetter[];
  cursor: string | undefined;
  nextCursor: string | null;
  /** What could not be read (a bad cursor), as messages for the operator. */
  problems: string[];
}

/** Every compensation that failed for good, newest first, with the way to each one's task and actions. */
export function deadLettersPage(context: ViewContext, data: DeadLetterListData): Html {
  const { links } = context;
  return layout(context, {
    title: 'Dead letters',
    section: 'dead-letters',
    body: html`<h1>Dead letters</h1>
<p class="muted">Compensations that failed for good. Retry one once its cause is fixed, or discard it when the effect was undone by hand.</p>
${data.problems.map((problem) => html`<p class="notice error" role="alert">${problem}</p>`)}
${
  data.items.length
    ? html`<table>
  <thead><tr><th scope="col">Created</th><th scope="col">Task</th><th scope="col">Step</th><th scope="col">Error</th><th scope="col" class="num">Retries</th><th scope="col">Actions</th></tr></thead>
  <tbody>${data.items.map((entry) => {
    const error = entry.error ?? {};
    const text = (key: string) => (typeof error[key] === 'string' ? (error[key] as string) : '');
    return html`<tr>
    <td>${timeElement(entry.createdAt)}</td>
    <td><a class="mono" href="${links.task(entry.taskId)}#dead-letter-${entry.id}">${entry.taskId}</a></td>
    <td><code>${text('stepKey')}</code></td>
    <td>${text('code') && html`<code>${text('code')}</code> `}${text('message').slice(0, 300)}${text('message').length > 300 && '…'}</td>
    <td class="num">${entry.retryCount ?? 0}</td>
    <td><div class="actions">
      <a class="button" href="${links.deadLetter(entry.taskId, entry.id, 'retry')}">Retry…</a>
      <a class="button secondary" href="${links.deadLetter(entry.taskId, entry.id, 'discard')}">Discard…</a>
    </div></td>
  </tr>`;
  })}</tbody>
</table>`
    : html`<p class="panel muted">The dead-letter queue is empty.</p>`
}
<nav class="pager" aria-label="Pages">
  ${data.cursor && html`<a href="${links.deadLetters()}">← Newest</a>`}
  ${data.nextCursor && html`<a href="${links.deadLetters({ cursor: data.nextCursor })}">Older entries →</a>`}
</nav>`,
  });
}
