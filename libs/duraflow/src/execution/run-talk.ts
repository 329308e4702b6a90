import { Inject, Injectable } from '@nestjs/common';
import { PayloadCoder } from '../codec/payload-coder';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { ResolvedStreamOptions } from '../config/stream.options';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { runScopeStorage } from '../decorators/run-scope';
import { InvalidPrimitiveCallError, RunAbortedError, StreamClosedError, StreamLimitError } from '../domain/errors';
import { WorkflowContext } from '../domain/workflow-context';
import { TaskLease } from '../lease/task-lease';
import { RunEventStore } from '../persistence/run-event.store';
import { ChunkBatch, chunksJson, KnownChunks, PendingChunk, StreamStore } from '../persistence/stream.store';
import { describeError } from '../util/describe-error';
import { OutputLimits, outputToJson, toJson } from '../util/json';
import { checkStorableJson } from '../validation/storable-text';
import { RunKernel } from './run-kernel';
import { checkTalkKey } from '../validation/talk-key';

/** What a run's events and streams write with. */
export interface RunTalkParts {
  events: RunEventStore;
  streams: StreamStore;
  coder: PayloadCoder;
  limits: ResolvedStreamOptions;
  outputLimits: OutputLimits;
}

/** A step attempt's chunks, waiting for the step's checkpoint. */
interface StepChunks {
  attempt: number;
  chunks: PendingChunk[];
}

/** Body chunks written in one statement at most; a run with more waiting waits for them to be written. */
const FLUSH_BATCH = 500;
const QUEUE_BOUND = 2_000;

/**
 * `ctx.setEvent`, `ctx.writeStream` and `ctx.closeStream` of one live run.
 *
 * In the workflow's body each call takes the next position of the run's body (a counter the
 * run's code moves the same way on every run of the task, as it takes its primitives' keys).
 * An event is written at once, fenced on the claim, only over a value of an earlier position: a
 * recovered run going through its recorded path again never brings back an older value.
 *
 * A body chunk is queued and written in the background, in order, many in one statement while
 * the one before commits (group commit), fenced on the claim; its origin is its position, and a
 * position that wrote its chunk in an earlier run writes nothing again. The queue is written
 * before the run's next event, close, checkpoint, wait and end (live-run.ts drains it): a crash
 * before then loses chunks no reader saw, and the replay writes them. States: idle, flushing
 * (one statement in flight, more queued), failed (the next call and the drain rethrow).
 *
 * Inside a step a chunk waits in the attempt until the step completes and is written in the
 * step's checkpoint statement: a failed attempt's chunks, or those of an attempt cut by a
 * crash, were never seen by a reader, and the next attempt writes its own. `setEvent` and
 * `closeStream` belong to the body (like `ctx.sleep`): inside a step they throw.
 */
export class RunTalk {
  private position = 0;
  private readonly closed = new Set<string>();
  private readonly buffered = new Map<string, StepChunks>();
  private readonly queue: PendingChunk[] = [];
  private flushing: Promise<void> | undefined;
  private failure: unknown;
  private known: Promise<KnownChunks> | undefined;
  /** Set when a write could not reach the database: the run must not decide anything. */
  persistenceFailure: unknown;

  constructor(
    private readonly run: { taskId: string; workflowName: string },
    private readonly lease: TaskLease,
    private readonly kernel: RunKernel,
    private readonly parts: RunTalkParts,
  ) {}

  async setEvent(key: string, value: unknown): Promise<void> {
    checkTalkKey('event', key);
    this.outsideStep(`ctx.setEvent("${key}")`);
    const json = outputToJson(value, this.parts.outputLimits, this.run.workflowName, `event:${key}`);
    checkStorableJson(json, `The value of event "${key}"`);
    const position = ++this.position;
    const stored = this.parts.coder.encodeJson(this.run.taskId, 'event', json ?? null);
    await this.drain(); // the chunks written before it are seen before it
    await this.write(() => this.parts.events.set(this.run.taskId, this.lease.claimToken, key, stored, position));
  }

  async writeStream(key: string, chunk: unknown): Promise<void> {
    checkTalkKey('stream', key);
    if (this.failure) throw this.failure;
    const json = toJson(chunk, `A chunk of stream "${key}"`) ?? 'null';
    checkStorableJson(json, `A chunk of stream "${key}"`);
    const bytes = Buffer.byteLength(json, 'utf8');
    const { maxChunkBytes, maxChunksPerTask } = this.parts.limits;
    if (bytes > maxChunkBytes) throw new StreamLimitError(this.run.taskId, key, 'maxChunkBytes', bytes, maxChunkBytes);
    const pending = { key, chunkJson: this.parts.coder.encodeJson(this.run.taskId, 'stream', json), origin: '' };
    const step = runScopeStorage.getStore()?.step;
    if (step) return this.bufferInStep(step.key, step.context.attempt, pending);
    pending.origin = `b:${++this.position}`;
    if (this.closed.has(key)) throw new StreamClosedError(this.run.taskId, key);
    const known = await this.knownChunks();
    if (known.bodyOrigins.has(pending.origin)) return; // an earlier run of the task wrote it
    if (known.total + this.waitingInSteps() >= maxChunksPerTask) {
      throw new StreamLimitError(this.run.taskId, key, 'maxChunksPerTask', known.total, maxChunksPerTask);
    }
    known.total++;
    this.queue.push(pending);
    this.flushing ??= this.flushQueue();
    if (this.queue.length >= QUEUE_BOUND) await this.drain();
  }

  async closeStream(key: string): Promise<void> {
    checkTalkKey('stream', key);
    this.outsideStep(`ctx.closeStream("${key}")`);
    this.position++;
    this.closed.add(key);
    await this.drain();
    await this.write(() => this.parts.streams.close(this.run.taskId, this.lease.claimToken, key));
  }

  /** Resolves once every queued body chunk is written; rethrows what stopped the writing. */
  async drain(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.failure) throw this.failure;
  }

  /** The chunks the attempt `attempt` of step `stepKey` wrote, to go in its checkpoint's statement; undefined when none. */
  takeStepChunks(stepKey: string, attempt: number): ChunkBatch | undefined {
    const entry = this.buffered.get(stepKey);
    this.buffered.delete(stepKey);
    if (!entry || entry.attempt !== attempt || !entry.chunks.length) return undefined;
    const count = entry.chunks.length;
    void this.known?.then((known) => (known.total += count));
    return { json: chunksJson(entry.chunks), count };
  }

  private async bufferInStep(stepKey: string, attempt: number, chunk: PendingChunk): Promise<void> {
    if (this.closed.has(chunk.key)) throw new StreamClosedError(this.run.taskId, chunk.key);
    let entry = this.buffered.get(stepKey);
    if (!entry || entry.attempt !== attempt) this.buffered.set(stepKey, (entry = { attempt, chunks: [] }));
    chunk.origin = `s:${stepKey}#${entry.chunks.length + 1}`;
    entry.chunks.push(chunk);
    const { total } = await this.knownChunks();
    if (total + this.waitingInSteps() > this.parts.limits.maxChunksPerTask) {
      entry.chunks.splice(entry.chunks.indexOf(chunk), 1);
      throw new StreamLimitError(this.run.taskId, chunk.key, 'maxChunksPerTask', total, this.parts.limits.maxChunksPerTask);
    }
  }

  private waitingInSteps(): number {
    let n = 0;
    for (const entry of this.buffered.values()) n += entry.chunks.length;
    return n;
  }

  private knownChunks(): Promise<KnownChunks> {
    return (this.known ??= this.lease.retry(() => this.parts.streams.known(this.run.taskId)));
  }

  private async flushQueue(): Promise<void> {
    try {
      while (this.queue.length && !this.failure) {
        const batch = this.queue.splice(0, FLUSH_BATCH);
        await this.write(() => this.parts.streams.appendBodyChunks(this.run.taskId, this.lease.claimToken, batch));
      }
    } catch (error) {
      this.failure = error;
    } finally {
      this.flushing = undefined;
    }
  }

  private outsideStep(call: string): void {
    const step = runScopeStorage.getStore()?.step;
    if (step) {
      throw new InvalidPrimitiveCallError(call, `called inside step "${step.key}": call it in the workflow's body, between steps.`);
    }
    this.kernel.throwIfStopped();
  }

  /** A fenced write through the lease; a run whose claim is lost, or that cannot reach the database, goes no further. */
  private async write(statement: () => Promise<boolean>): Promise<void> {
    let landed: boolean;
    try {
      landed = await this.lease.write(statement);
    } catch (error) {
      this.kernel.throwIfStopped();
      this.persistenceFailure = error;
      throw new RunAbortedError(this.run.taskId, `an event or stream write failed (${describeError(error).message})`);
    }
    if (!landed) this.kernel.throwIfStopped();
  }
}

/** The context's events and streams: the live run's RunTalk; the replay check has none and writes nothing. */
export type TalkEffects = Pick<WorkflowContext, 'setEvent' | 'writeStream' | 'closeStream'>;

const SILENT_TALK: TalkEffects = {
  setEvent: () => Promise.resolve(),
  writeStream: () => Promise.resolve(),
  closeStream: () => Promise.resolve(),
};

/** The three calls as the context gives them (bound to `talk`, or writing nothing without one). */
export function talkPrimitives(talk: TalkEffects | undefined): TalkEffects {
  const to = talk ?? SILENT_TALK;
  return {
    setEvent: (key, value) => to.setEvent(key, value),
    writeStream: (key, chunk) => to.writeStream(key, chunk),
    closeStream: (key) => to.closeStream(key),
  };
}

/** Opens the RunTalk of each live run (live-run.ts), with the stores, the codec and the `streams` bounds. */
@Injectable()
export class RunTalks {
  constructor(
    private readonly events: RunEventStore,
    private readonly streams: StreamStore,
    private readonly coder: PayloadCoder,
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
  ) {}

  open(run: { id: string; workflowName: string }, lease: TaskLease, kernel: RunKernel): RunTalk {
    const { events, streams, coder } = this;
    const outputLimits = { maxBytes: this.options.maxOutputBytes, maxDepth: this.options.maxJsonDepth };
    return new RunTalk({ taskId: run.id, workflowName: run.workflowName }, lease, kernel, {
      ...{ events, streams, coder, outputLimits },
      limits: this.options.streams,
    });
  }
}
