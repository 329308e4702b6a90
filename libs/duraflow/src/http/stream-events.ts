import { MessageEvent } from '@nestjs/common';
import { Observable } from 'rxjs';
import { InvalidListOptionsError } from '../domain/errors';
import { WorkflowService } from '../services/workflow.service';

/** `streamEvents`' options. */
export interface StreamEventsOptions {
  /** The `Last-Event-ID` header of a reconnecting EventSource: it wins over `after`. */
  lastEventId?: string | string[];
  /** Start after this seq when there is no Last-Event-ID (e.g. `?after=` of the url). Default 0. */
  after?: number | string;
  /** The reconnection delay the first message tells the browser (`retry:`), in ms. Default 1000. */
  retryMs?: number;
}

/** The name of the last message, sent once the stream has ended: the client closes its EventSource on it. */
export const STREAM_END_EVENT = 'end';

/**
 * A run's stream as Server-Sent Events, for a host app's Nest `@Sse()` route: one message per
 * chunk (`id:` its seq, `data:` its value as JSON), from the chunk after `lastEventId` (or
 * `after`), live while the run writes, then one `end` message (`data: {"lastSeq":n}`) and the
 * end of the response. A browser's EventSource that lost its connection reconnects with
 * `Last-Event-ID`, so it sees each chunk once, in order. Unsubscribing (the client went away)
 * stops the read. Bad `lastEventId`/`after`: InvalidListOptionsError, at once.
 */
export function streamEvents(
  workflows: WorkflowService,
  taskId: string,
  key: string,
  options: StreamEventsOptions = {},
): Observable<MessageEvent> {
  const after = startAfter(options);
  workflows.readStream(taskId, key, { after }); // checks the key now; nothing is read before a subscriber iterates
  return new Observable<MessageEvent>((subscriber) => {
    const stop = new AbortController();
    const iterator = workflows.readStream(taskId, key, { after, signal: stop.signal })[Symbol.asyncIterator]();
    void (async () => {
      let lastSeq = after;
      let first = true;
      try {
        for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
          lastSeq = next.value.seq;
          const retry = first ? (options.retryMs ?? 1000) : undefined;
          first = false;
          subscriber.next({ id: String(lastSeq), data: JSON.stringify(next.value.value ?? null), ...(retry ? { retry } : {}) });
        }
        if (stop.signal.aborted) return;
        subscriber.next({ type: STREAM_END_EVENT, id: String(lastSeq), data: JSON.stringify({ lastSeq }) });
        subscriber.complete();
      } catch (error) {
        subscriber.error(error);
      }
    })();
    return () => stop.abort();
  });
}

function startAfter(options: StreamEventsOptions): number {
  const header = Array.isArray(options.lastEventId) ? options.lastEventId[0] : options.lastEventId;
  const raw = header !== undefined && header !== '' ? header : (options.after ?? 0);
  const after = typeof raw === 'number' ? raw : /^\d{1,15}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(after) || after < 0) {
    throw new InvalidListOptionsError(
      header !== undefined && header !== '' ? 'Last-Event-ID' : 'after',
      `must be a seq (an integer >= 0), got ${String(raw)}.`,
    );
  }
  return after;
}
