import { Injectable } from '@nestjs/common';
import { PayloadCoder } from '../../codec/payload-coder';
import { UUID_PATTERN } from '../../domain/duraflow.constants';
import { RunEventStore } from '../../persistence/run-event.store';
import { StreamStore } from '../../persistence/stream.store';
import { StreamChunk } from './run-talk-reader';

/** A task's events and streams as an operator's page shows them. */
export interface RunTalkOverview {
  /** Every event with its latest value, by key. */
  events: Array<{ key: string; value: unknown; updatedAt: Date }>;
  /** Every stream, by key, with its last chunks (oldest first). */
  streams: Array<{ key: string; lastSeq: number; closedAt: Date | null; tail: StreamChunk[] }>;
}

/**
 * The reads of the dashboard's task page over a run's events and streams: the latest values,
 * each stream's tail, and a stamp that moves whenever the run sets or writes anything (the
 * live page's fingerprint takes it). A value no configured key opens shows as `[cannot decrypt]`.
 */
@Injectable()
export class RunTalkOverviews {
  constructor(
    private readonly events: RunEventStore,
    private readonly streams: StreamStore,
    private readonly coder: PayloadCoder,
  ) {}

  async overview(taskId: string, options: { limit: number; tail: number }): Promise<RunTalkOverview> {
    if (!UUID_PATTERN.test(taskId)) return { events: [], streams: [] };
    const [events, heads] = await Promise.all([this.events.list(taskId, options.limit), this.streams.heads(taskId, options.limit)]);
    const tails = await Promise.all(heads.map((head) => this.streams.tail(taskId, head.key, options.tail)));
    return {
      events: events.map((event) => ({
        key: event.key,
        value: this.coder.tryDecode(taskId, 'event', event.value).value,
        updatedAt: event.updatedAt,
      })),
      streams: heads.map((head, index) => ({
        ...head,
        tail: tails[index].map((row) => ({
          seq: row.seq,
          value: this.coder.tryDecode(taskId, 'stream', row.chunk).value,
          writtenAt: row.createdAt,
        })),
      })),
    };
  }

  /** Moves whenever the run sets an event or writes to or closes a stream. */
  stamp(taskId: string): Promise<string> {
    return UUID_PATTERN.test(taskId) ? this.streams.talkStamp(taskId) : Promise.resolve('');
  }
}
