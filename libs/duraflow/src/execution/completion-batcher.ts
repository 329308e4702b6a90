import { Injectable } from '@nestjs/common';
import { TaskTransitions } from '../persistence/lifecycle/task-transitions';
import { GroupCommit } from './group-commit';

interface Completion {
  id: string;
  claimToken: string;
  outputJson: string | null;
}

/** NOTIFY payloads are limited to 8000 bytes: 36-character ids and commas. */
const MAX_BATCH = 200;

/**
 * Group commit for task completions: the completions of one event-loop turn go in one
 * statement (with one NOTIFY naming them all), and those that arrive while it commits go in
 * the next. Each completion is still fenced on its own claim and resolves only once its write
 * committed.
 */
@Injectable()
export class CompletionBatcher {
  private readonly group: GroupCommit<Completion, boolean>;

  constructor(transitions: TaskTransitions) {
    this.group = new GroupCommit({
      maxBatch: MAX_BATCH,
      start: 'next-tick',
      write: async (batch) => {
        const done = await transitions.complete(
          batch.map((item) => item.id),
          batch.map((item) => item.claimToken),
          batch.map((item) => item.outputJson),
        );
        return batch.map((item) => done.has(item.id));
      },
    });
  }

  /** Resolves true when the task completed under this claim, false when the claim no longer owns it. */
  complete(id: string, claimToken: string, outputJson: string | null): Promise<boolean> {
    return this.group.submit({ id, claimToken, outputJson });
  }
}
