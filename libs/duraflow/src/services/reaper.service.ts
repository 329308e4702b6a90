import { Inject, Injectable, Logger } from '@nestjs/common';
import { RESOLVED_DURAFLOW_OPTIONS } from '../duraflow.constants';
import { ResolvedDuraflowOptions } from '../duraflow.options';
import { TaskStore } from '../persistence/task.store';

export interface ReapResult {
  /** Stale tasks put back to `pending` (one more retry counted). */
  requeued: string[];
  /** Stale tasks that had used up `max_retries`. */
  failed: string[];
}

/** Recovers the tasks of dead workers: running tasks whose heartbeat went stale. */
@Injectable()
export class ReaperService {
  private readonly logger = new Logger('Duraflow');

  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly tasks: TaskStore,
  ) {}

  /** One reaping pass over tasks stale for longer than `reaper.staleAfterMs`. */
  async reapOnce(): Promise<ReapResult> {
    const reaped = await this.tasks.reapStaleTasks(this.options.reaper.staleAfterMs);
    const result: ReapResult = {
      requeued: reaped.filter((task) => task.status === 'pending').map((task) => task.id),
      failed: reaped.filter((task) => task.status === 'failed').map((task) => task.id),
    };
    if (reaped.length) {
      this.logger.log(`Reaped ${reaped.length} stale task(s): ${result.requeued.length} re-queued, ${result.failed.length} failed`);
    }
    return result;
  }
}
