import { RunTalkOverview } from '../../services/workflows/run-talk-overview';
import { timeElement } from './format';
import { html, Html } from './html';

/** A value on one line, cut to `chars` (a chunk or an event is meant to be small; the API gives it whole). */
function inline(value: unknown, chars: number): Html {
  const text = JSON.stringify(value ?? null);
  return html`<code>${text.length > chars ? `${text.slice(0, chars)}…` : text}</code>`;
}

/**
 * The run's events (latest value of each key, `ctx.setEvent`) and streams (`ctx.writeStream`):
 * each stream with its chunk count, whether it is closed, and its last chunks. The page's live
 * updates redraw it when the run sets or writes anything (the stamp is in the page's fingerprint).
 */
export function talkSection(talk: RunTalkOverview, previewChars: number): Html {
  const events =
    talk.events.length > 0 &&
    html`<h2>Events (${talk.events.length})</h2>
<table aria-label="Events">
  <thead><tr><th scope="col">Key</th><th scope="col">Latest value</th><th scope="col">Set at</th></tr></thead>
  <tbody>${talk.events.map(
    (event) =>
      html`<tr><td><code>${event.key}</code></td><td>${inline(event.value, previewChars)}</td><td>${timeElement(event.updatedAt)}</td></tr>`,
  )}</tbody>
</table>`;
  const streams =
    talk.streams.length > 0 &&
    html`<h2>Streams (${talk.streams.length})</h2>
${talk.streams.map(
  (stream) => html`<section class="panel" aria-label="Stream ${stream.key}">
  <h3><code>${stream.key}</code>: ${stream.lastSeq} chunk${stream.lastSeq === 1 ? '' : 's'}, ${stream.closedAt ? html`closed ${timeElement(stream.closedAt)}` : 'open'}</h3>
  ${
    stream.tail.length > 0 &&
    html`<ol class="stream-tail" start="${stream.tail[0].seq}">${stream.tail.map((chunk) => html`<li>${inline(chunk.value, previewChars)}</li>`)}</ol>`
  }
  ${stream.tail.length > 0 && stream.tail[0].seq > 1 && html`<p class="muted">The last ${stream.tail.length}; all: <code>workflows.readStream</code> or <code>GET /tasks/:id/streams/${stream.key}</code>.</p>`}
</section>`,
)}`;
  return html`${events}${streams}`;
}
