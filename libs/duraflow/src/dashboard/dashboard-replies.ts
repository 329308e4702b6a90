import { Inject, Injectable } from '@nestjs/common';
import { DuraflowError } from '../domain/errors';
import { duraflowErrorStatus } from '../domain/errors/error-status';
import { DashboardLinks } from './dashboard-links';
import { DashboardReply, DashboardResponder, page } from './dashboard-responder';
import { DASHBOARD_OPTIONS, ResolvedDashboardOptions } from './dashboard.options';
import { ViewContext } from './views/layout';
import { messagePage } from './views/message.page';

/** The replies every dashboard route shares: a view's context, an action's refusal, a page saying what is not there. */
@Injectable()
export class DashboardReplies {
  constructor(
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    private readonly responder: DashboardResponder,
  ) {}

  /** Runs an action; a typed error of the library is shown to the operator with its message. */
  async act(response: unknown, links: DashboardLinks, next: Array<[string, string]>, action: () => Promise<DashboardReply>): Promise<void> {
    let reply: DashboardReply;
    try {
      reply = await action();
    } catch (error) {
      if (!(error instanceof DuraflowError)) throw error;
      reply = page(
        messagePage(this.context(links), { title: 'The action was refused', code: error.code, message: error.message, next }),
        duraflowErrorStatus(error).http,
      );
    }
    this.send(response, reply);
  }

  /** A page that says what is not there (or not possible), with the way back to the task. */
  missing(links: DashboardLinks, taskId: string, title: string, message: string, status = 404): DashboardReply {
    return page(messagePage(this.context(links), { title, message, next: [['Back to the task', links.task(taskId)]] }), status);
  }

  taskMissing(context: ViewContext, id: string): DashboardReply {
    const message = `No task has the id ${id}. It may have been deleted; check the id.`;
    return page(
      messagePage(context, { title: 'No such task', code: 'TASK_NOT_FOUND', message, next: [['All tasks', context.links.home()]] }),
      404,
    );
  }

  context(links: DashboardLinks): ViewContext {
    return { links, options: this.options, now: new Date() };
  }

  send(response: unknown, reply: DashboardReply): void {
    this.responder.send(response, reply);
  }
}
