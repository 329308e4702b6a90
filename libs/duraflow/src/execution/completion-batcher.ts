import { Injectable } from '@nestjs/common';
import { TaskStore } from '../persistence/task.store';

interface PendingCompletion {
  id: string;
  claimToken: string;
  outputJson: string | null;
  resolve: (owned: boolean) => void;
  reject: (error: unknown) => void;
}

/** NOTIFY payloads are limited to 8000 bytes: 36-character ids and commas. */
const MAX_BATCH = 200;

/**
 * Group commit for task completions: the first completion is written at once; those that
 * arrive while a write is in flight go together in the next one. No timer, so an idle worker
 * adds no latency, and a busy one writes one statement (and one NOTIFY) for many tasks. Each
 * completion is still fenced on its own claim and resolves only once its write committed.
 */
@Injectable()
export class CompletionBatcher {
  private readonly queue: PendingCompletion[] = [];
  private flushing = false;

  constructor(private readonly tasks: TaskStore) {}

  /** Resolves true when the task completed under this claim, false when the claim no longer owns it. */
  complete(id: string, claimToken: string, outputJson: string | null): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      this.queue.push({ id, claimToken, outputJson, resolve, reject });
      if (!this.flushing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.queue.length) {
        const batch = this.queue.splice(0, MAX_BATCH);
        try {
          const done = await this.tasks.completeTasks(
            batch.map((item) => item.id),
            batch.map((item) => item.claimToken),
            batch.map((item) => item.outputJson),
          );
          for (const item of batch) item.resolve(done.has(item.id));
        } catch (error) {
          for (const item of batch) item.reject(error);
        }
      }
    } finally {
      this.flushing = false;
    }
  }
}
