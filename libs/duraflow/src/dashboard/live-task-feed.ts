import { Inject, Injectable, MessageEvent, OnModuleDestroy } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { Observable, Subscriber } from 'rxjs';
import { DuraflowLogger } from '../observability/duraflow-logger';
import { describeError } from '../util/describe-error';
import { isTerminalStatus } from '../domain/task-status';
import { TaskProgress } from '../domain/task-summaries';
import { WorkflowService } from '../services/workflow.service';
import { RunTalkOverviews } from '../services/workflows/run-talk-overview';
import { DASHBOARD_OPTIONS, ResolvedDashboardOptions } from './dashboard.options';

/** A short fingerprint of a task's progress: equal fingerprints, nothing to redraw. */
export function progressVersion(progress: TaskProgress, talkStamp = ''): string {
  // talkStamp (RunTalkOverviews.stamp) moves with the run's events and streams, which leave the task's row as it is.
  return createHash('sha1').update(JSON.stringify(progress)).update(talkStamp).digest('hex').slice(0, 16);
}

/**
 * The server-sent events of a task page. Each open page polls `getProgress` (one cheap
 * statement, no values read) every `liveIntervalMs` and gets a `progress` event
 * `{ status, version }` when the fingerprint moved; `end` once the task is finished, then the
 * stream closes (`gone` if the task does not exist). A failed poll (database outage) is
 * retried on the next tick. Open streams are ended when the application shuts down, so they
 * never hold the HTTP server open.
 */
@Injectable()
export class LiveTaskFeed implements OnModuleDestroy {
  private readonly logger = new DuraflowLogger('DuraflowDashboard');
  private readonly open = new Set<Subscriber<MessageEvent>>();
  private failing = false;

  constructor(
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    private readonly workflows: WorkflowService,
    private readonly talk: RunTalkOverviews,
  ) {}

  follow(taskId: string): Observable<MessageEvent> {
    return new Observable<MessageEvent>((subscriber) => {
      let timer: NodeJS.Timeout | undefined;
      let last: string | undefined;
      const poll = async () => {
        try {
          const progress = await this.workflows.getProgress(taskId);
          this.failing = false;
          if (!progress) {
            subscriber.next({ type: 'gone', data: { taskId } });
            subscriber.complete();
            return;
          }
          const version = progressVersion(progress, await this.talk.stamp(taskId));
          if (version !== last) {
            last = version;
            subscriber.next({ type: 'progress', data: { status: progress.status, version } });
          }
          if (isTerminalStatus(progress.status)) {
            subscriber.next({ type: 'end', data: { status: progress.status } });
            subscriber.complete();
            return;
          }
        } catch (error) {
          if (!this.failing) {
            this.logger.warn(`Live updates cannot read task progress (retrying): ${describeError(error).message}`, { taskId });
          }
          this.failing = true;
        }
        if (!subscriber.closed) timer = setTimeout(poll, this.options.liveIntervalMs);
      };
      this.open.add(subscriber);
      void poll();
      return () => {
        clearTimeout(timer);
        this.open.delete(subscriber);
      };
    });
  }

  async onModuleDestroy(): Promise<void> {
    if (!this.open.size) return;
    for (const subscriber of [...this.open]) subscriber.complete();
    // Let the responses end before the HTTP server closes: a connection still busy when it
    // closes would be kept until its keep-alive timeout.
    await new Promise((resolve) => setImmediate(resolve));
  }
}
