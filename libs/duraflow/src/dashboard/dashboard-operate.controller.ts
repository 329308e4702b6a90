import { Controller, Get, Injectable, Param, Post, Query, Res, Type, UseFilters, UseGuards } from '@nestjs/common';
import { BulkTaskFilter } from '../domain/bulk-operations';
import { WorkflowService } from '../services/workflow.service';
import { AllowedHostGuard } from './allowed-host.guard';
import { BulkAction, DashboardLinks } from './dashboard-links';
import { DashboardExceptionFilter } from './dashboard-exception.filter';
import { DashboardReplies } from './dashboard-replies';
import { DashboardReply, page, redirect } from './dashboard-responder';
import { ResolvedDashboardOptions } from './dashboard.options';
import { NulCharacterGuard } from './nul-character.guard';
import { RequestLinks } from './request-links';
import { SameOriginGuard } from './same-origin.guard';
import { filterQuery, parseTaskFilters, TaskFilters } from './task-filters';
import { messagePage } from './views/message.page';
import { bulkResultPage, confirmBulkPage, confirmForkPage, confirmRetryPage } from './views/operate.page';

type QueryParams = Record<string, unknown>;

const BULK_ACTIONS: readonly BulkAction[] = ['cancel', 'retry', 'resume'];

/**
 * The dashboard's operator actions on runs: retry a task, fork one from a step, and cancel, retry
 * or resume every task a list's filters match. As in DashboardController, each is a POST behind
 * SameOriginGuard, reached from a GET page that asks for confirmation (a bulk one after a dry run
 * that counts the tasks it will change); the library decides what may change.
 */
@Injectable()
export class DashboardOperateController {
  constructor(
    private readonly workflows: WorkflowService,
    private readonly replies: DashboardReplies,
  ) {}

  @Get('tasks/:id/retry')
  async confirmRetry(@Param('id') id: string, @RequestLinks() links: DashboardLinks, @Res() response: unknown): Promise<void> {
    await this.replies.onTask(response, links, id, async (context, task) =>
      page(confirmRetryPage(context, task, await this.workflows.getStepSummaries(id, { previewChars: 1 }))),
    );
  }

  /** Retries it through WorkflowService.retry; a task that cannot be retried gets the library's refusal. */
  @Post('tasks/:id/retry')
  @UseGuards(SameOriginGuard)
  async retry(@Param('id') id: string, @RequestLinks() links: DashboardLinks, @Res() response: unknown): Promise<void> {
    await this.replies.actOnTask(response, links, id, 'task-retried', () => this.workflows.retry(id));
  }

  @Get('tasks/:id/fork')
  async confirmFork(
    @Param('id') id: string,
    @Query('step') stepKey: unknown,
    @RequestLinks() links: DashboardLinks,
    @Res() response: unknown,
  ): Promise<void> {
    await this.replies.onTask(response, links, id, async (context, task) => {
      const steps = await this.workflows.getStepSummaries(id, { previewChars: 1 });
      const fromStep = steps.find((step) => step.stepKey === stepKey);
      if (!fromStep) {
        const message = `Task ${task.id} has no step "${String(stepKey ?? '')}" to fork from: choose "Fork from here" on one of its steps.`;
        return this.replies.missing(links, id, 'No such step', message);
      }
      return page(confirmForkPage(context, task, steps, fromStep));
    });
  }

  /** Forks it through WorkflowService.fork and takes the operator to the new task. */
  @Post('tasks/:id/fork')
  @UseGuards(SameOriginGuard)
  async fork(@Param('id') id: string, @Query('step') stepKey: unknown, @RequestLinks() links: DashboardLinks, @Res() response: unknown) {
    await this.replies.act(response, links, [['Back to the task', links.task(id)]], async () => {
      const forked = await this.workflows.fork(id, { fromStep: typeof stepKey === 'string' ? stepKey : '' });
      return redirect(links.task(forked.id, { notice: 'forked' }));
    });
  }

  /** How many tasks the action would change (a dry run), and the button that does it. */
  @Get('bulk/:action')
  async confirmBulk(
    @Param('action') action: string,
    @Query() query: QueryParams,
    @RequestLinks() links: DashboardLinks,
    @Res() response: unknown,
  ) {
    await this.bulkReply(response, links, action, query, async (bulk, filters) => {
      const { matched } = await this.runBulk(bulk, filters, true);
      return page(confirmBulkPage(this.replies.context(links), bulk, filters, matched));
    });
  }

  @Post('bulk/:action')
  @UseGuards(SameOriginGuard)
  async bulk(
    @Param('action') action: string,
    @Query() query: QueryParams,
    @RequestLinks() links: DashboardLinks,
    @Res() response: unknown,
  ) {
    await this.bulkReply(response, links, action, query, async (bulk, filters) => {
      const result = await this.runBulk(bulk, filters, false);
      return page(bulkResultPage(this.replies.context(links), bulk, filters, result));
    });
  }

  /** A bulk action's reply: an unknown action or filters that cannot be read are refused before anything is counted. */
  private async bulkReply(
    response: unknown,
    links: DashboardLinks,
    action: string,
    query: QueryParams,
    reply: (action: BulkAction, filters: TaskFilters) => Promise<DashboardReply>,
  ): Promise<void> {
    const { filters, problems } = parseTaskFilters(query);
    const back: Array<[string, string]> = [['Back to the list', links.home(filterQuery(filters, ['cursor']))]];
    if (!isBulkAction(action)) problems.push(`"${action}" is not a bulk action: cancel, retry or resume.`);
    else if (filters.held && action !== 'resume') problems.push('The "held" filter goes with resume only: clear it to cancel or retry.');
    if (problems.length) {
      const context = this.replies.context(links);
      return this.replies.send(
        response,
        page(messagePage(context, { title: 'Bulk action refused', message: problems.join(' '), next: back }), 400),
      );
    }
    await this.replies.act(response, links, back, () => reply(action as BulkAction, filters));
  }

  private runBulk(action: BulkAction, filters: TaskFilters, dryRun: boolean): Promise<{ matched: number; changed: number }> {
    const filter: BulkTaskFilter = {
      workflow: filters.workflow,
      status: filters.status ? [filters.status] : undefined,
      createdAfter: filters.from,
      createdBefore: filters.to,
      tags: filters.tags,
    };
    // `held` is resume's own filter (resumeMany changes held tasks only): alone, it means every held task.
    if (filters.held && !filter.workflow && !filter.status && !filter.createdAfter && !filter.createdBefore && !filter.tags)
      filter.all = true;
    if (action === 'cancel') return this.workflows.cancelMany(filter, { dryRun });
    if (action === 'retry') return this.workflows.retryMany(filter, { dryRun });
    return this.workflows.resumeMany(filter, { dryRun });
  }
}

function isBulkAction(action: string): action is BulkAction {
  return (BULK_ACTIONS as readonly string[]).includes(action);
}

/** The operator actions at `options.path`, behind the same guards and filter as the rest of the dashboard. */
export function mountDashboardOperateController(options: ResolvedDashboardOptions): Type<DashboardOperateController> {
  @Controller(options.path)
  @UseGuards(AllowedHostGuard, ...options.guards, NulCharacterGuard)
  @UseFilters(DashboardExceptionFilter)
  class MountedDashboardOperateController extends DashboardOperateController {}
  return MountedDashboardOperateController;
}
