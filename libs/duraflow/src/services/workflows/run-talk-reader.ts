import { Injectable } from '@nestjs/common';
import { PayloadCoder } from '../../codec/payload-coder';
import { UUID_PATTERN } from '../../domain/duraflow.constants';
import { EventTimeoutError, InvalidListOptionsError, TaskNotFoundError } from '../../domain/errors';
import { isTerminalStatus } from '../../domain/task-status';
import { TaskNotifications } from '../../notifications/task-notifications';
import { RunEventStore } from '../../persistence/run-event.store';
import { StreamStore } from '../../persistence/stream.store';
import { checkWaitOptions } from '../../validation/call-options';
import { checkTalkKey } from '../../validation/talk-key';

/** `workflows.getEvent(taskId, key, { timeoutMs })`. */
export interface GetEventOptions {
  /** How long to wait for the run to set the event: 0 to 2,147,483,647 ms. Default 30 s. */
  timeoutMs?: number;
}

/** `workflows.readStream(taskId, key, { after, signal })`. */
export interface ReadStreamOptions {
  /** Start after this seq (the seq of the last chunk read; an SSE client's Last-Event-ID). Default 0: from the first. */
  after?: number;
  /** Aborting it ends the iteration (a client that went away). */
  signal?: AbortSignal;
}

/** A chunk of a stream as `readStream` yields it. */
export interface StreamChunk<T = unknown> {
  /** 1, 2, 3… per (task, stream key), in the order the chunks were committed. */
  seq: number;
  value: T;
  writtenAt: Date;
}

const PAGE = 100;
/** While LISTEN is down, how often a reader looks again; while it is up, a safety net only. */
const POLL_WITHOUT_LISTEN_MS = 250;
const SAFETY_RECHECK_MS = 30_000;

/**
 * Reads what runs tell: their events (`getEvent`, waiting until set) and streams (`readStream`,
 * live while the run writes). Both are woken by the NOTIFY the writing statement sends at commit
 * (TASK_TALK_CHANNEL, and the finished channel for a task that ends); they poll only while the
 * LISTEN connection is down.
 */
@Injectable()
export class RunTalkReader {
  /**
   * While LISTEN is down, how often a waiting reader looks again. Internal, not an option: a test
   * lengthens it to show that a waiting reader is woken by the NOTIFY, not by this poll.
   */
  pollWithoutListenMs = POLL_WITHOUT_LISTEN_MS;

  constructor(
    private readonly notifications: TaskNotifications,
    private readonly events: RunEventStore,
    private readonly streams: StreamStore,
    private readonly coder: PayloadCoder,
  ) {}

  /** @throws InvalidWaitOptionsError, TaskNotFoundError, EventTimeoutError */
  async getEvent<T = unknown>(taskId: string, key: string, options: GetEventOptions = {}): Promise<T> {
    checkTalkKey('event', key);
    const { timeoutMs } = checkWaitOptions({ timeoutMs: options?.timeoutMs });
    if (typeof taskId !== 'string' || !UUID_PATTERN.test(taskId)) throw new TaskNotFoundError(String(taskId));
    const deadline = Date.now() + timeoutMs;
    const wake = await this.wakeOn(taskId);
    try {
      for (;;) {
        wake.reset();
        const { taskStatus, event } = await this.events.get(taskId, key);
        if (taskStatus === null) throw new TaskNotFoundError(taskId);
        if (event) return this.coder.decode(taskId, 'event', event.value) as T;
        const remaining = deadline - Date.now();
        if (remaining <= 0) throw new EventTimeoutError(taskId, key, timeoutMs);
        await wake.next(remaining);
      }
    } finally {
      wake.close();
    }
  }

  /** @throws InvalidListOptionsError (at once); TaskNotFoundError (from the first `next`) */
  readStream<T = unknown>(taskId: string, key: string, options: ReadStreamOptions = {}): AsyncIterable<StreamChunk<T>> {
    checkTalkKey('stream', key);
    const after = options?.after ?? 0;
    if (typeof after !== 'number' || !Number.isSafeInteger(after) || after < 0) {
      throw new InvalidListOptionsError('after', `must be an integer >= 0 (the seq of the last chunk read), got ${String(options.after)}.`);
    }
    return this.chunks<T>(String(taskId), key, after, options?.signal);
  }

  private async *chunks<T>(taskId: string, key: string, start: number, signal: AbortSignal | undefined): AsyncGenerator<StreamChunk<T>> {
    if (!UUID_PATTERN.test(taskId)) throw new TaskNotFoundError(taskId);
    const wake = await this.wakeOn(taskId, signal);
    let after = start;
    try {
      while (!signal?.aborted) {
        wake.reset();
        const page = await this.streams.page(taskId, key, after, PAGE);
        for (const row of page) {
          after = row.seq;
          yield { seq: row.seq, value: this.coder.decode(taskId, 'stream', row.chunk) as T, writtenAt: row.createdAt };
        }
        if (page.length) continue;
        const state = await this.streams.state(taskId, key);
        if (state.taskStatus === null) throw new TaskNotFoundError(taskId);
        if (state.lastSeq > after) continue;
        // Closed, or the task ended without closing it (a terminal task writes no more): the stream ends.
        if (state.closed || isTerminalStatus(state.taskStatus)) return;
        await wake.next(SAFETY_RECHECK_MS);
      }
    } finally {
      wake.close();
    }
  }

  private async wakeOn(taskId: string, signal?: AbortSignal): Promise<TalkWake> {
    const wake = new TalkWake(this.notifications, taskId, signal, this.pollWithoutListenMs);
    await this.notifications.ensureListening();
    return wake;
  }
}

/** Wakes a reader when its task's run tells something, its task ends, LISTEN is lost, or `signal` aborts. */
class TalkWake {
  private notified = false;
  private resolve: (() => void) | undefined;
  private readonly offs: Array<() => void>;

  constructor(
    private readonly notifications: TaskNotifications,
    taskId: string,
    private readonly signal: AbortSignal | undefined,
    private readonly pollWithoutListenMs: number,
  ) {
    const mine = (id: string) => id === taskId && this.fire();
    const onAbort = () => this.fire();
    signal?.addEventListener('abort', onAbort);
    this.offs = [
      notifications.onTalk(mine),
      notifications.onFinished(mine),
      notifications.onListenLost(() => this.fire()),
      () => signal?.removeEventListener('abort', onAbort),
    ];
  }

  /** Before a read: a notification from now on wakes the next `next`. */
  reset(): void {
    this.notified = false;
  }

  /** Resolves at the next notification (at once if one came since `reset`), or after `maxMs`. */
  async next(maxMs: number): Promise<void> {
    if (this.notified || this.signal?.aborted) return;
    const ms = this.notifications.listening ? maxMs : Math.min(maxMs, this.pollWithoutListenMs);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.resolve = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.resolve = undefined;
  }

  close(): void {
    for (const off of this.offs) off();
    this.resolve?.();
  }

  private fire(): void {
    this.notified = true;
    this.resolve?.();
  }
}
