import { Controller, Get, Injectable, Query, Res, Type, UseFilters, UseGuards } from '@nestjs/common';
import { EVENT_NAME_PATTERN } from '../domain/event-options';
import { WorkflowService } from '../services/workflow.service';
import { AllowedHostGuard } from './allowed-host.guard';
import { DashboardLinks } from './dashboard-links';
import { DashboardExceptionFilter } from './dashboard-exception.filter';
import { DashboardReplies } from './dashboard-replies';
import { page } from './dashboard-responder';
import { ResolvedDashboardOptions } from './dashboard.options';
import { NulCharacterGuard } from './nul-character.guard';
import { RequestLinks } from './request-links';
import { eventsPage } from './views/events.page';

const EVENTS_SHOWN = 100;

/** The Events page: recent published events with the tasks each started, and the open debounces and batches (read only). */
@Injectable()
export class DashboardEventsController {
  constructor(
    private readonly workflows: WorkflowService,
    private readonly replies: DashboardReplies,
  ) {}

  @Get('events')
  async events(@Query('name') name: unknown, @RequestLinks() links: DashboardLinks, @Res() response: unknown): Promise<void> {
    const filter = typeof name === 'string' && EVENT_NAME_PATTERN.test(name) ? name : undefined;
    const [events, groups] = await Promise.all([
      this.workflows.listEvents({ name: filter, limit: EVENTS_SHOWN }),
      this.workflows.listEventGroups(),
    ]);
    this.replies.send(response, page(eventsPage(this.replies.context(links), { events, groups, name: filter })));
  }
}

/** The Events page at `options.path`, behind the same guards and filter as the rest of the dashboard. */
export function mountDashboardEventsController(options: ResolvedDashboardOptions): Type<DashboardEventsController> {
  @Controller(options.path)
  @UseGuards(AllowedHostGuard, ...options.guards, NulCharacterGuard)
  @UseFilters(DashboardExceptionFilter)
  class MountedDashboardEventsController extends DashboardEventsController {}
  return MountedDashboardEventsController;
}
