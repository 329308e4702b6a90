import { Body, Controller, Get, Injectable, Param, Post, Res, Type, UseFilters, UseGuards } from '@nestjs/common';
import { AgentTask } from '../domain/entities/agent-task.entity';
import { WorkflowService } from '../services/workflow.service';
import { CallbackInfo } from '../services/workflows/task-callbacks';
import { AllowedHostGuard } from './allowed-host.guard';
import { DashboardExceptionFilter } from './dashboard-exception.filter';
import { DashboardLinks } from './dashboard-links';
import { DashboardReplies } from './dashboard-replies';
import { DashboardReply, page } from './dashboard-responder';
import { ResolvedDashboardOptions } from './dashboard.options';
import { NulCharacterGuard } from './nul-character.guard';
import { RequestLinks } from './request-links';
import { SameOriginGuard } from './same-origin.guard';
import { ViewContext } from './views/layout';
import { callbackFormPage } from './views/task-callbacks';

/**
 * An operator completes a run's open callback (`ctx.createCallback`) from its task's page: a
 * form (GET) whose POST, behind SameOriginGuard, goes through WorkflowService.completeCallback,
 * the same rules as a POST to the callback's url; a refusal is the library's typed error.
 */
@Injectable()
export class DashboardCallbacksController {
  constructor(
    private readonly workflows: WorkflowService,
    private readonly replies: DashboardReplies,
  ) {}

  @Get('tasks/:id/callbacks/:callback')
  async form(
    @Param('id') id: string,
    @Param('callback') callbackId: string,
    @RequestLinks() links: DashboardLinks,
    @Res() response: unknown,
  ) {
    await this.onCallback(response, links, id, callbackId, (context, task, callback) => page(callbackFormPage(context, task, callback)));
  }

  /** Completes it; a body that is not JSON is shown back on the form. */
  @Post('tasks/:id/callbacks/:callback')
  @UseGuards(SameOriginGuard)
  async complete(
    @Param('id') id: string,
    @Param('callback') callbackId: string,
    @Body() body: { payload?: unknown } | undefined,
    @RequestLinks() links: DashboardLinks,
    @Res() response: unknown,
  ): Promise<void> {
    const text = typeof body?.payload === 'string' ? body.payload : '';
    let payload: unknown;
    try {
      payload = JSON.parse(text);
    } catch (error) {
      const problem = `The body is not JSON: ${(error as Error).message}`;
      return this.onCallback(response, links, id, callbackId, (context, task, callback) =>
        page(callbackFormPage(context, task, callback, problem, text), 400),
      );
    }
    await this.replies.actOnTask(response, links, id, 'callback-completed', () => this.workflows.completeCallback(callbackId, payload));
  }

  /** A page about callback `callbackId` of task `id`, or the page saying the task has no such callback. */
  private async onCallback(
    response: unknown,
    links: DashboardLinks,
    id: string,
    callbackId: string,
    render: (context: ViewContext, task: AgentTask, callback: CallbackInfo) => DashboardReply,
  ): Promise<void> {
    await this.replies.onTask(response, links, id, async (context, task) => {
      const callback = (await this.workflows.listCallbacks(id)).find((candidate) => candidate.id === callbackId);
      if (callback) return render(context, task, callback);
      return this.replies.missing(links, id, 'No such callback', `Task ${task.id} has no callback ${callbackId}.`);
    });
  }
}

/** The callbacks' form at `options.path`, behind the same guards and filter as the rest of the dashboard. */
export function mountDashboardCallbacksController(options: ResolvedDashboardOptions): Type<DashboardCallbacksController> {
  @Controller(options.path)
  @UseGuards(AllowedHostGuard, ...options.guards, NulCharacterGuard)
  @UseFilters(DashboardExceptionFilter)
  class MountedDashboardCallbacksController extends DashboardCallbacksController {}
  return MountedDashboardCallbacksController;
}
