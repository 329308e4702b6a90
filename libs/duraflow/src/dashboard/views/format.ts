import { html, Html } from './html';

/** Every time is rendered in UTC, to the millisecond (operators compare them with logs); the page's script shows it in the viewer's zone. */
export function formatTime(time: Date | string | null | undefined): string {
  if (!time) return '—';
  const date = time instanceof Date ? time : new Date(time);
  return Number.isNaN(date.getTime()) ? '—' : date.toISOString().replace('T', ' ').replace('Z', '');
}

/** A `<time>` element: the UTC text, with the exact ISO instant for tools and screen readers. */
export function timeElement(time: Date | string | null | undefined): Html {
  if (!time) return html`<span class="muted">—</span>`;
  const date = time instanceof Date ? time : new Date(time);
  return html`<time datetime="${date.toISOString()}" title="${formatTime(date)} UTC">${formatTime(date)}</time>`;
}

/**
 * A time within a known day (a step within its task): the time of day alone when it is on
 * `day`'s UTC date, the full time otherwise; the full instant is in `datetime` and `title`.
 */
export function timeOfDayElement(time: Date | null | undefined, day: Date | null | undefined): Html {
  if (!time) return html`<span class="muted">—</span>`;
  const full = formatTime(time);
  const sameDay = day && day.toISOString().slice(0, 10) === time.toISOString().slice(0, 10);
  return html`<time datetime="${time.toISOString()}" title="${full} UTC">${sameDay ? full.slice(11) : full}</time>`;
}

export function formatDuration(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms) || ms < 0) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const seconds = Math.round(ms / 1000);
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
  const minutes = Math.round(seconds / 60);
  if (minutes < 1440) return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
  return `${Math.floor(minutes / 1440)} d ${Math.floor((minutes % 1440) / 60)} h`;
}

/** From `start` to `end` (or to now while it runs); null when it never started. */
export function durationBetween(start: Date | null, end: Date | null, now = new Date()): number | null {
  if (!start) return null;
  return (end ?? now).getTime() - start.getTime();
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** `yyyy-mm-ddThh:mm:ss` in UTC, the value a `datetime-local` input takes. */
export function toDateTimeLocal(date: Date | undefined): string {
  return date ? date.toISOString().slice(0, 19) : '';
}
