import { Controller, Get, Injectable, Param, Post, Query, Res, Type, UseFilters, UseGuards } from '@nestjs/common';
import { UnknownWorkflowError } from '../domain/errors';
import { ScheduleInfo } from '../domain/schedule-options';
import { WorkflowService } from '../services/workflow.service';
import { WorkflowInsights } from '../services/workflows/workflow-insights';
import { AllowedHostGuard } from './allowed-host.guard';
import { DashboardLinks, ScheduleAction } from './dashboard-links';
import { DashboardExceptionFilter } from './dashboard-exception.filter';
import { DashboardReplies } from './dashboard-replies';
import { DashboardReply, page, redirect } from './dashboard-responder';
import { ResolvedDashboardOptions } from './dashboard.options';
import { NulCharacterGuard } from './nul-character.guard';
import { RequestLinks } from './request-links';
import { SameOriginGuard } from './same-origin.guard';
import { messagePage } from './views/message.page';
import { isOverviewWindow, overviewPage } from './views/overview.page';
import { confirmSchedulePage, isWorkflowNotice, workflowPage } from './views/workflow.page';

const SCHEDULE_ACTIONS: readonly ScheduleAction[] = ['pause', 'resume', 'trigger'];

/**
 * The pages the person on call opens first: the overview (charts per window, per workflow) and a
 * page per registered workflow, with its schedules' actions (pause, resume, trigger now). As in
 * DashboardController, each action is a POST behind SameOriginGuard, reached from a GET page that
 * asks for confirmation; the library decides what may change.
 */
@Injectable()
export class DashboardOverviewController {
  constructor(
    private readonly workflows: WorkflowService,
    private readonly insights: WorkflowInsights,
    private readonly replies: DashboardReplies,
  ) {}

  @Get('overview')
  async overview(@Query('window') window: unknown, @RequestLinks() links: DashboardLinks, @Res() response: unknown): Promise<void> {
    const overview = await this.insights.overview(isOverviewWindow(window) ? window : 'day');
    this.replies.send(response, page(overviewPage(this.replies.context(links), overview)));
  }

  @Get('workflows/:name')
  async workflow(
    @Param('name') name: string,
    @Query('notice') notice: unknown,
    @RequestLinks() links: DashboardLinks,
    @Res() response: unknown,
  ): Promise<void> {
    await this.onWorkflow(response, links, name, async () => {
      const description = await this.insights.describe(name);
      return page(workflowPage(this.replies.context(links), description, isWorkflowNotice(notice) ? notice : undefined));
    });
  }

  @Get('workflows/:name/schedules/:schedule/:action')
  async confirmSchedule(
    @Param('name') name: string,
    @Param('schedule') scheduleName: string,
    @Param('action') action: string,
    @RequestLinks() links: DashboardLinks,
    @Res() response: unknown,
  ): Promise<void> {
    await this.onWorkflow(response, links, name, async () => {
      const schedule = await this.scheduleOf(name, scheduleName);
      if (!schedule || !isScheduleAction(action)) return this.noSuchSchedule(links, name, scheduleName, action);
      return page(confirmSchedulePage(this.replies.context(links), name, schedule, action));
    });
  }

  /** Pauses, resumes or triggers the schedule through WorkflowService; a trigger leads to the task it started. */
  @Post('workflows/:name/schedules/:schedule/:action')
  @UseGuards(SameOriginGuard)
  async schedule(
    @Param('name') name: string,
    @Param('schedule') scheduleName: string,
    @Param('action') action: string,
    @RequestLinks() links: DashboardLinks,
    @Res() response: unknown,
  ): Promise<void> {
    await this.replies.act(response, links, [['Back to the workflow', links.workflow(name)]], async () => {
      const schedule = await this.scheduleOf(name, scheduleName);
      if (!schedule || !isScheduleAction(action)) return this.noSuchSchedule(links, name, scheduleName, action);
      if (action === 'trigger') return redirect(links.task((await this.workflows.triggerSchedule(scheduleName)).id));
      if (action === 'pause') await this.workflows.pauseSchedule(scheduleName);
      else await this.workflows.resumeSchedule(scheduleName);
      return redirect(
        `${links.workflow(name)}?notice=schedule-${action === 'pause' ? 'paused' : 'resumed'}#schedule-${encodeURIComponent(scheduleName)}`,
      );
    });
  }

  /** The workflow's schedule of that name, as listSchedules shows it; undefined when it has none. */
  private async scheduleOf(workflow: string, scheduleName: string): Promise<ScheduleInfo | undefined> {
    return (await this.workflows.listSchedules()).find((entry) => entry.name === scheduleName && entry.workflow === workflow);
  }

  /** A page about workflow `name`, or "No such workflow" (404) when this application registers none by that name. */
  private async onWorkflow(response: unknown, links: DashboardLinks, name: string, render: () => Promise<DashboardReply>): Promise<void> {
    let reply: DashboardReply;
    try {
      reply = await render();
    } catch (error) {
      if (!(error instanceof UnknownWorkflowError)) throw error;
      const context = this.replies.context(links);
      reply = page(
        messagePage(context, {
          title: 'No such workflow',
          code: error.code,
          message: error.message,
          next: [['Overview', links.overview()]],
        }),
        404,
      );
    }
    this.replies.send(response, reply);
  }

  private noSuchSchedule(links: DashboardLinks, workflow: string, schedule: string, action: string): DashboardReply {
    const message = isScheduleAction(action)
      ? `Workflow "${workflow}" has no schedule named "${schedule}" in this application: check the name on the workflow's page.`
      : `"${action}" is not an action on a schedule: pause, resume or trigger.`;
    return page(
      messagePage(this.replies.context(links), {
        title: 'No such schedule',
        code: 'UNKNOWN_SCHEDULE',
        message,
        next: [['Back to the workflow', links.workflow(workflow)]],
      }),
      404,
    );
  }
}

function isScheduleAction(action: string): action is ScheduleAction {
  return (SCHEDULE_ACTIONS as readonly string[]).includes(action);
}

/** The overview and workflow pages at `options.path`, behind the same guards and filter as the rest of the dashboard. */
export function mountDashboardOverviewController(options: ResolvedDashboardOptions): Type<DashboardOverviewController> {
  @Controller(options.path)
  @UseGuards(AllowedHostGuard, ...options.guards, NulCharacterGuard)
  @UseFilters(DashboardExceptionFilter)
  class MountedDashboardOverviewController extends DashboardOverviewController {}
  return MountedDashboardOverviewController;
}
