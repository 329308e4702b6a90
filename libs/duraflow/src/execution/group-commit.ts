/**
 * Group commit: writes queued items in batches, one statement (one commit) per batch and
 * one batch in flight at a time. Items that arrive while a batch is being written go together
 * in the next one, so a busy process writes few large statements and an idle one adds no
 * timer. Each caller's promise settles only once the statement holding its item committed
 * (or failed: then every item of that batch rejects with the error).
 */
export interface GroupCommitOptions<I, R> {
  /** Writes one batch; returns one result per item, in the order of `items`. */
  write: (items: I[]) => Promise<R[]>;
  /** At most this many items per statement. */
  maxBatch: number;
  /**
   * `now`: the first item is written at once (lowest latency for a lone writer).
   * `next-tick`: the first write waits for the end of the current event-loop turn, so the items
   * produced in the same turn (e.g. every task of one claim finishing) share one statement.
   */
  start: 'now' | 'next-tick';
}

interface Queued<I, R> {
  item: I;
  resolve: (result: R) => void;
  reject: (error: unknown) => void;
}

export class GroupCommit<I, R> {
  private readonly queue: Array<Queued<I, R>> = [];
  private flushing = false;

  constructor(private readonly options: GroupCommitOptions<I, R>) {}

  submit(item: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (this.flushing) return;
      this.flushing = true;
      if (this.options.start === 'now') void this.flush();
      else setImmediate(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    try {
      while (this.queue.length) {
        const batch = this.queue.splice(0, this.options.maxBatch);
        try {
          const results = await this.options.write(batch.map((queued) => queued.item));
          batch.forEach((queued, index) => queued.resolve(results[index]));
        } catch (error) {
          for (const queued of batch) queued.reject(error);
        }
      }
    } finally {
      this.flushing = false;
    }
  }
}
