import { JsonPreview } from '../../domain/task-summaries';
import { formatBytes } from './format';
import { html, Html } from './html';

/** Values this short are shown as they are; longer ones fold into an expander. */
const INLINE_CHARS = 240;
const INLINE_LINES = 8;

/**
 * A preview of a value the server already holds whole (a task's input or output, at most the
 * module's byte limits): indented as PostgreSQL's jsonb_pretty indents step previews, then cut.
 */
export function previewOf(value: unknown, previewChars: number): JsonPreview | null {
  if (value === null || value === undefined) return null;
  const pretty = JSON.stringify(value, null, 4);
  return {
    text: pretty.slice(0, previewChars),
    truncated: pretty.length > previewChars,
    bytes: Buffer.byteLength(JSON.stringify(value), 'utf8'),
  };
}

/**
 * A JSON value on a page: short ones inline, long ones in an expander, and a cut one with the
 * link to its whole value (served as JSON), so a value of MiBs never makes a page of MiBs.
 */
export function valueBlock(value: { id: string; label: string; preview: JsonPreview | null; href: string }): Html {
  const { preview } = value;
  if (!preview) return html`<div><span class="muted">${value.label}: none</span></div>`;
  const lines = preview.text.split('\n').length;
  if (!preview.truncated && preview.text.length <= INLINE_CHARS && lines <= INLINE_LINES) {
    return html`<div><span class="muted">${value.label}</span><pre>${preview.text}</pre></div>`;
  }
  return html`<details id="${value.id}">
  <summary>${value.label} · ${formatBytes(preview.bytes)}${preview.truncated && ' (cut)'}</summary>
  <pre>${preview.text}${preview.truncated && '\n…'}</pre>
  ${
    preview.truncated
      ? html`<p class="muted">The first ${preview.text.length.toLocaleString('en')} characters. <a href="${value.href}">The whole ${value.label} (JSON, ${formatBytes(preview.bytes)})</a></p>`
      : html`<p><a href="${value.href}">${value.label} as JSON</a></p>`
  }
</details>`;
}

/** Characters of a value's one-line summary in a table cell. */
const SUMMARY_CHARS = 72;

/**
 * A JSON value in a table cell: one line of it (whitespace folded) that opens to the indented
 * preview, and to the link to the whole value when the preview is cut.
 */
export function compactValue(value: { id: string; label: string; preview: JsonPreview | null; href: string }): Html {
  const { preview } = value;
  if (!preview) return html``;
  const line = preview.text.replace(/\s+/g, ' ');
  const short = line.length > SUMMARY_CHARS || preview.truncated ? `${line.slice(0, SUMMARY_CHARS)}…` : line;
  return html`<details id="${value.id}" class="value">
  <summary><span class="muted">${value.label}</span> <code>${short}</code>${preview.truncated && html` <span class="muted">${formatBytes(preview.bytes)}</span>`}</summary>
  <pre>${preview.text}${preview.truncated && '\n…'}</pre>
  <a href="${value.href}">${preview.truncated ? html`The whole ${value.label} (JSON, ${formatBytes(preview.bytes)})` : html`${value.label} as JSON`}</a>
</details>`;
}

/** A stored error (task, step or dead letter): code, name and message; the stack folded; long text cut with a link to the whole error. */
export function errorBlock(
  error: Record<string, unknown> | null | undefined,
  id: string,
  href: string | undefined,
  previewChars: number,
): Html {
  if (!error) return html``;
  const text = (key: string) => (typeof error[key] === 'string' ? (error[key] as string) : undefined);
  const message = text('message') ?? JSON.stringify(error);
  const stack = text('stack');
  const cut = message.length > previewChars || (stack?.length ?? 0) > previewChars;
  return html`<div class="step-error">
  ${text('code') && html`<code>${text('code')}</code>`} ${text('name') && html`<strong>${text('name')}</strong>:`}
  ${message.slice(0, previewChars)}${message.length > previewChars && '…'}
  ${stack && html`<details id="${id}"><summary>stack</summary><pre>${stack.slice(0, previewChars)}${stack.length > previewChars && '\n…'}</pre></details>`}
  ${cut && href && html`<a href="${href}">The whole error (JSON)</a>`}
</div>`;
}
