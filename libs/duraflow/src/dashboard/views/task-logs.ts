import { RunLogPage } from '../../services/workflows/run-log-reader';
import { timeElement } from './format';
import { html, Html } from './html';

/** The first page of the lines the run kept with `ctx.log`, beside its steps: each with its level, step key and attempt. */
export function logsSection(logs: RunLogPage): Html {
  if (!logs.items.length) return html``;
  const more =
    logs.nextAfterSeq !== null &&
    html`<p class="muted">The first ${logs.items.length} lines; the rest: <code>GET /tasks/:id/logs?afterSeq=${logs.nextAfterSeq}</code> or <code>workflows.getLogs</code>.</p>`;
  return html`<h2>Logs (${logs.items.length}${logs.nextAfterSeq !== null && ' shown'})</h2>
<table>
  <thead><tr><th scope="col">#</th><th scope="col">At</th><th scope="col">Level</th><th scope="col">Step</th><th scope="col">Message</th><th scope="col">Metadata</th></tr></thead>
  <tbody>${logs.items.map(
    (line) => html`<tr>
    <td>${line.seq}</td><td>${timeElement(line.at)}</td><td><code>${line.level}</code></td>
    <td>${line.stepKey === null ? html`<span class="muted">body</span>` : html`<code>${line.stepKey}</code> #${line.attempt}`}</td>
    <td>${line.message}</td><td>${line.metadata === null ? '' : html`<code>${JSON.stringify(line.metadata)}</code>`}</td>
  </tr>`,
  )}</tbody>
</table>
${more}`;
}
