import { AgentTask } from '../../domain/entities/agent-task.entity';
import { html, Html, HtmlValue } from './html';
import { statusBadge, ViewContext } from './layout';
import { timeElement } from './format';
import { errorBlock } from './values';

/** The task it was forked from and the step it ran anew from, linked; nothing for a task that is no fork. */
export function forkFact(context: ViewContext, task: AgentTask): Array<[string, HtmlValue]> {
  const origin = task.forkedFrom ?? (task.forkedFromTaskId ? { taskId: task.forkedFromTaskId, fromStep: task.forkedFromStep ?? '' } : null);
  if (!origin) return [];
  return [
    [
      'Forked from',
      html`<a href="${context.links.task(origin.taskId)}" data-forked-from="${origin.taskId}"><code>${origin.taskId}</code></a> (from step <code>${origin.fromStep}</code>)`,
    ],
  ];
}

/** Each retry and fork, oldest first: when, the status a retry left and the error it had then (a retry clears it on the task), a fork's task linked. */
export function historySection(context: ViewContext, task: AgentTask): Html {
  const entries = task.history ?? [];
  if (!entries.length) return html``;
  const { options } = context;
  return html`<h2>History (${entries.length})</h2>
<table aria-label="The task's history">
  <thead><tr><th scope="col" class="num">#</th><th scope="col">When</th><th scope="col">What</th><th scope="col">Error it had</th></tr></thead>
  <tbody>${entries.map(
    (entry, index) => html`<tr class="history-entry">
    <td class="num">${index + 1}</td>
    <td>${timeElement(entry.at)}</td>
    ${
      entry.kind === 'forked'
        ? html`<td>forked from step <code>${entry.fromStep}</code> as <a href="${context.links.task(entry.forkId)}" data-fork="${entry.forkId}"><code>${entry.forkId}</code></a></td>
    <td><span class="muted">—</span></td>`
        : html`<td>retried from ${statusBadge(entry.fromStatus)}</td>
    <td>${entry.error ? errorBlock(entry.error as unknown as Record<string, unknown>, `history-${index}-stack`, undefined, options.previewChars) : html`<span class="muted">none</span>`}</td>`
    }
  </tr>`,
  )}</tbody>
</table>`;
}
