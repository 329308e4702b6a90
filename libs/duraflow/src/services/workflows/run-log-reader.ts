import { Injectable } from '@nestjs/common';
import { UUID_PATTERN } from '../../domain/duraflow.constants';
import { InvalidListOptionsError } from '../../domain/errors';
import { listLimit } from '../../persistence/cursor';
import { RunLogLine, RunLogStore } from '../../persistence/run-log.store';

export type { RunLogLine } from '../../persistence/run-log.store';

/** `workflows.getLogs(id, { afterSeq, limit })`: the lines after `afterSeq` (default 0), at most `limit`. */
export interface GetLogsOptions {
  afterSeq?: number;
  limit?: number;
}

/** One page of a run's log lines, in order; `nextAfterSeq` (null on the last page) asks for the next. */
export interface RunLogPage {
  items: RunLogLine[];
  nextAfterSeq: number | null;
}

/** Reads the lines a run kept with `ctx.log`, a page at a time. */
@Injectable()
export class RunLogReader {
  constructor(private readonly logs: RunLogStore) {}

  /** @throws InvalidListOptionsError (a bad `afterSeq` or `limit`; nothing read) */
  async getLogs(id: string, options: GetLogsOptions = {}): Promise<RunLogPage> {
    const limit = listLimit(options.limit);
    const afterSeq = options.afterSeq ?? 0;
    if (typeof afterSeq !== 'number' || !Number.isSafeInteger(afterSeq) || afterSeq < 0) {
      throw new InvalidListOptionsError(
        'afterSeq',
        `must be an integer >= 0 (the seq of the last line read), got ${String(options.afterSeq)}.`,
      );
    }
    if (!isTaskId(id)) return { items: [], nextAfterSeq: null };
    const items = await this.logs.page(id, afterSeq, limit + 1);
    const more = items.length > limit;
    if (more) items.length = limit;
    return { items, nextAfterSeq: more ? items[items.length - 1].seq : null };
  }
}

function isTaskId(id: unknown): id is string {
  return typeof id === 'string' && UUID_PATTERN.test(id);
}
