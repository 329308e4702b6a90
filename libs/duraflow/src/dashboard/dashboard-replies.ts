import { Inject, Injectable } from '@nestjs/common';
import { AgentTask } from '../domain/entities/agent-task.entity';
import { DuraflowError } from '../domain/errors';
import { duraflowErrorStatus } from '../domain/errors/error-status';
import { DashboardLinks } from './dashboard-links';
import { WorkflowService } from '../services/workflow.service';
import { DashboardReply, DashboardResponder, page, redirect } from './dashboard-responder';
import { DASHBOARD_OPTIONS, ResolvedDashboardOptions } from './dashboard.options';
import { ViewContext } from './views/layout';
import { messagePage } from './views/message.page';

/** The replies every dashboard route shares: a view's context, an action's refusal, a page saying what is not there. */
@Injectable()
export class DashboardReplies {
  constructor(
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    private readonly responder: DashboardResponder,
    private readonly workflows: WorkflowService,
  ) {}

  /** A page about task `id`: `render`'s reply, or the "No such task" page when no task has that id. */
  async onTask(
    response: unknown,
    links: DashboardLinks,
    id: string,
    render: (context: ViewContext, task: AgentTask) => Promise<DashboardReply> | DashboardReply,
  ): Promise<void> {
    const context = this.context(links);
    const task = await this.workflows.get(id);
    this.send(response, task ? await render(context, task) : this.taskMissing(context, id));
  }

  /** An action on task `id` (see `act`), then back to the task's page with `notice`. */
  async actOnTask(response: unknown, links: DashboardLinks, id: string, notice: string, action: () => Promise<unknown>): Promise<void> {
    await this.act(response, links, [['Back to the task', links.task(id)]], async () => {
      await action();
      return redirect(links.task(id, { notice }));
    });
  }

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
