import { DuraflowError } from './duraflow.error';

/** `workflows.getEvent` waited `timeoutMs` and the run had not set the event. */
export class EventTimeoutError extends DuraflowError {
  readonly code = 'EVENT_TIMEOUT';
  constructor(
    readonly taskId: string,
    readonly key: string,
    readonly timeoutMs: number,
  ) {
    super(
      `Task "${taskId}" has not set event "${key}" within ${timeoutMs} ms. ` +
        `Wait longer ({ timeoutMs }), or check that the workflow calls ctx.setEvent("${key}", value).`,
    );
  }
}

/** An event or stream key outside 1 to 255 characters (no NUL). */
export class InvalidTalkKeyError extends DuraflowError {
  readonly code = 'INVALID_TALK_KEY';
  constructor(
    readonly what: 'event' | 'stream',
    readonly key: unknown,
  ) {
    super(`Invalid ${what} key ${JSON.stringify(key) ?? String(key)}: use a string of 1 to 255 characters without NUL.`);
  }
}

/**
 * A stream chunk past a bound of the `streams` option: larger than `maxChunkBytes` as JSON, or
 * one more than the `maxChunksPerTask` chunks a task may keep. Nothing was written.
 */
export class StreamLimitError extends DuraflowError {
  readonly code = 'STREAM_LIMIT';
  constructor(
    readonly taskId: string,
    readonly key: string,
    readonly limit: 'maxChunkBytes' | 'maxChunksPerTask',
    readonly value: number,
    readonly max: number,
  ) {
    super(
      limit === 'maxChunkBytes'
        ? `A chunk of stream "${key}" (task "${taskId}") is ${value} bytes as JSON; at most ${max} are accepted (streams.maxChunkBytes). Split it into smaller chunks.`
        : `Task "${taskId}" already keeps ${value} stream chunks, the most it may (streams.maxChunksPerTask = ${max}); stream "${key}" got none more. Write fewer, larger chunks, or raise the option.`,
    );
  }
}

/** `ctx.writeStream` on a stream the run closed: a closed stream takes no chunk. */
export class StreamClosedError extends DuraflowError {
  readonly code = 'STREAM_CLOSED';
  constructor(
    readonly taskId: string,
    readonly key: string,
  ) {
    super(`Stream "${key}" of task "${taskId}" is closed: write every chunk before ctx.closeStream("${key}"), or use another key.`);
  }
}
