import { viewable } from '../codec/decoded-rows';
import { Body, Controller, Get, Injectable, MessageEvent, Param, Post, Query, Res, Sse, Type, UseFilters, UseGuards } from '@nestjs/common';
import { Observable } from 'rxjs';
import { isHeld, isTerminalStatus } from '../domain/task-status';
import { SagaService } from '../services/saga.service';
import { WorkflowService } from '../services/workflow.service';
import { DashboardLinks, DeadLetterAction, StepValueKind } from './dashboard-links';
import { DashboardReader } from './dashboard-reader';
import { DashboardReplies } from './dashboard-replies';
import { page, redirect } from './dashboard-responder';
import { DashboardExceptionFilter } from './dashboard-exception.filter';
import { ResolvedDashboardOptions } from './dashboard.options';
import { LiveTaskFeed } from './live-task-feed';
import { RequestLinks } from './request-links';
import { AllowedHostGuard } from './allowed-host.guard';
import { NulCharacterGuard } from './nul-character.guard';
import { SameOriginGuard } from './same-origin.guard';
import { parseTaskFilters } from './task-filters';
import { confirmCancelPage, confirmDeadLetterPage, confirmResumePage, signalFormPage } from './views/confirm.page';
import { deadLettersPage } from './views/dead-letters.page';
import { isTaskNotice, taskLiveContent, taskPage } from './views/task.page';
import { taskListPage } from './views/task-list.page';

type QueryParams = Record<string, unknown>;

const VALUE_KINDS: readonly StepValueKind[] = ['input', 'output', 'error'];
const DEAD_LETTER_ACTIONS: readonly DeadLetterAction[] = ['retry', 'discard'];

/**
 * The dashboard's routes, relative to where it is mounted. `forRoot` mounts a subclass of it at
 * the configured path behind the host's guards (mountDashboardController). Reads go through
 * DashboardReader, actions through WorkflowService and SagaService; every action is a POST
 * behind SameOriginGuard, reached from a GET page that asks for confirmation.
 */
@Injectable()
export class DashboardController {
  constructor(
    private readonly workflows: WorkflowService,
    private readonly saga: SagaService,
    private readonly reader: DashboardReader,
    private readonly feed: LiveTaskFeed,
    private readonly replies: DashboardReplies,
  ) {}

  @Get()
  async tasks(@Query() query: QueryParams, @RequestLinks() links: DashboardLinks, @Res() response: unknown): Promise<void> {
    const { filters, problems } = parseTaskFilters(query);
    if (filters.id) {
      if (await this.workflows.get(filters.id)) return this.replies.send(response, redirect(links.task(filters.id)));
      problems.push(`No task has the id ${filters.id}.`);
    }
    const data = await this.reader.taskList(filters, problems);
    this.replies.send(response, page(taskListPage(this.replies.context(links), data), problems.length ? 400 : 200));
  }

  @Get('dead-letters')
  async deadLetters(@Query() query: QueryParams, @RequestLinks() links: DashboardLinks, @Res() response: unknown): Promise<void> {
    const data = await this.reader.deadLetterList(typeof query.cursor === 'string' && query.cursor ? query.cursor : undefined);
    this.replies.send(response, page(deadLettersPage(this.replies.context(links), data), data.problems.length ? 400 : 200));
  }

  @Get('tasks/:id')
  async task(
    @Param('id') id: string,
    @Query() query: QueryParams,
    @RequestLinks() links: DashboardLinks,
    @Res() response: unknown,
  ): Promise<void> {
    const details = await this.reader.taskDetails(id, signalsCursor(query));
    const context = this.replies.context(links);
    if (!details) return this.replies.send(response, this.replies.taskMissing(context, id));
    this.replies.send(response, page(taskPage(context, details, isTaskNotice(query.notice) ? query.notice : undefined)));
  }

  /** The live part of a task's page alone, for the client script to swap in. */
  @Get('tasks/:id/live')
  async taskLive(
    @Param('id') id: string,
    @Query() query: QueryParams,
    @RequestLinks() links: DashboardLinks,
    @Res() response: unknown,
  ): Promise<void> {
    const details = await this.reader.taskDetails(id, signalsCursor(query));
    const context = this.replies.context(links);
    if (!details) return this.replies.send(response, this.replies.taskMissing(context, id));
    this.replies.send(response, page(taskLiveContent(context, details)));
  }

  @Sse('tasks/:id/events')
  taskEvents(@Param('id') id: string): Observable<MessageEvent> {
    return this.feed.follow(id);
  }

  /** A task's whole input, output or error, as JSON (a page shows only its first characters). */
  @Get('tasks/:id/values/:kind')
  async taskValue(
    @Param('id') id: string,
    @Param('kind') kind: string,
    @RequestLinks() links: DashboardLinks,
    @Res() response: unknown,
  ): Promise<void> {
    // A value no configured key opens is shown as "[cannot decrypt]" (codec/decoded-rows.ts).
    const task = isValueKind(kind) ? viewable(await this.workflows.get(id)) : null;
    if (!task || !isValueKind(kind))
      return this.replies.send(response, this.replies.missing(links, id, 'No such value', `Task ${id} has no ${kind}.`));
    this.replies.send(response, { kind: 'json', body: JSON.stringify(task[kind] ?? null), filename: `task-${task.id}-${kind}.json` });
  }

  /** A step's whole input, output or error, as JSON. */
  @Get('tasks/:id/steps/:key/:kind')
  async stepValue(
    @Param('id') id: string,
    @Param('key') key: string,
    @Param('kind') kind: string,
    @RequestLinks() links: DashboardLinks,
    @Res() response: unknown,
  ): Promise<void> {
    const step = isValueKind(kind) ? viewable(await this.workflows.getStep(id, key)) : null;
    if (!step || !isValueKind(kind))
      return this.replies.send(
        response,
        this.replies.missing(links, id, 'No such step', `Task ${id} has no step "${key}" with a ${kind}.`),
      );
    this.replies.send(response, { kind: 'json', body: JSON.stringify(step[kind] ?? null), filename: `step-${step.id}-${kind}.json` });
  }

  @Get('tasks/:id/cancel')
  async confirmCancel(
    @Param('id') id: string,
    @Query('compensate') compensate: unknown,
    @RequestLinks() links: DashboardLinks,
    @Res() response: unknown,
  ): Promise<void> {
    await this.replies.onTask(response, links, id, async (context, task) => {
      if (isTerminalStatus(task.status)) {
        const message = `Task ${task.id} already finished (${task.status}): there is nothing to cancel.`;
        return this.replies.missing(links, id, 'Nothing to cancel', message, 409);
      }
      const steps = await this.workflows.getStepSummaries(id, { previewChars: 1 });
      return page(confirmCancelPage(context, task, steps, compensate === 'true'));
    });
  }

  @Post('tasks/:id/cancel')
  @UseGuards(SameOriginGuard)
  async cancel(
    @Param('id') id: string,
    @Query('compensate') compensate: unknown,
    @RequestLinks() links: DashboardLinks,
    @Res() response: unknown,
  ): Promise<void> {
    const withCompensation = compensate === 'true';
    const notice = withCompensation ? 'cancelled-compensated' : 'cancelled';
    await this.replies.actOnTask(response, links, id, notice, () => this.workflows.cancel(id, { compensate: withCompensation }));
  }

  /** What resuming a task the determinism guard holds does, and the divergence that held it. */
  @Get('tasks/:id/resume')
  async confirmResume(@Param('id') id: string, @RequestLinks() links: DashboardLinks, @Res() response: unknown): Promise<void> {
    await this.replies.onTask(response, links, id, (context, task) => {
      if (!isHeld(task)) {
        const message = `Task ${task.id} is not held by the determinism guard (status ${task.status}): there is nothing to resume.`;
        return this.replies.missing(links, id, 'Nothing to resume', message, 409);
      }
      return page(confirmResumePage(context, task));
    });
  }

  /** Resumes it through WorkflowService.resume: it runs again on the code deployed now. */
  @Post('tasks/:id/resume')
  @UseGuards(SameOriginGuard)
  async resume(@Param('id') id: string, @RequestLinks() links: DashboardLinks, @Res() response: unknown): Promise<void> {
    await this.replies.actOnTask(response, links, id, 'resumed', () => this.workflows.resume(id));
  }

  @Get('tasks/:id/signal')
  async signalForm(@Param('id') id: string, @RequestLinks() links: DashboardLinks, @Res() response: unknown): Promise<void> {
    await this.replies.onTask(response, links, id, (context, task) => page(signalFormPage(context, task)));
  }

  /** Sends the signal through WorkflowService.signal; a payload that is not JSON is shown back on the form. */
  @Post('tasks/:id/signal')
  @UseGuards(SameOriginGuard)
  async signal(
    @Param('id') id: string,
    @Body() body: { name?: unknown; payload?: unknown } | undefined,
    @RequestLinks() links: DashboardLinks,
    @Res() response: unknown,
  ): Promise<void> {
    const name = typeof body?.name === 'string' ? body.name : '';
    const text = typeof body?.payload === 'string' ? body.payload : '';
    let payload: unknown;
    if (text.trim()) {
      try {
        payload = JSON.parse(text);
      } catch (error) {
        const problem = `The payload is not JSON: ${(error as Error).message}`;
        return this.replies.onTask(response, links, id, (context, task) =>
          page(signalFormPage(context, task, problem, { name, payload: text }), 400),
        );
      }
    }
    await this.replies.actOnTask(response, links, id, 'signalled', () => this.workflows.signal(id, name, payload));
  }

  @Get('tasks/:id/dead-letters/:entry/:action')
  async confirmDeadLetter(
    @Param('id') id: string,
    @Param('entry') entryId: string,
    @Param('action') action: string,
    @RequestLinks() links: DashboardLinks,
    @Res() response: unknown,
  ): Promise<void> {
    await this.replies.onTask(response, links, id, async (context, task) => {
      const entry = (await this.reader.deadLettersOf(id)).find((candidate) => candidate.id === entryId);
      if (!entry || !isDeadLetterAction(action)) {
        const message = `Task ${task.id} has no dead letter ${entryId} to ${action}: it may have been retried successfully or discarded already.`;
        return this.replies.missing(links, id, 'No such dead letter', message);
      }
      const step = (await this.workflows.getStepSummaries(id, { previewChars: 1 })).find((candidate) => candidate.id === entry.stepId);
      return page(confirmDeadLetterPage(context, task, entry, step, action));
    });
  }

  @Post('tasks/:id/dead-letters/:entry/:action')
  @UseGuards(SameOriginGuard)
  async deadLetterAction(
    @Param('id') id: string,
    @Param('entry') entryId: string,
    @Param('action') action: string,
    @RequestLinks() links: DashboardLinks,
    @Res() response: unknown,
  ): Promise<void> {
    await this.replies.act(
      response,
      links,
      [
        ['Back to the task', links.task(id)],
        ['Dead letters', links.deadLetters()],
      ],
      async () => {
        if (action === 'retry') {
          const result = await this.saga.retryDeadLetter(entryId);
          return redirect(links.task(result.task?.id ?? id, { notice: result.outcome === 'compensated' ? 'retried' : 'retry-failed' }));
        }
        if (action === 'discard') {
          const task = await this.saga.discardDeadLetter(entryId);
          return task ? redirect(links.task(task.id, { notice: 'discarded' })) : redirect(links.deadLetters());
        }
        return this.replies.missing(links, id, 'No such action', `"${action}" is not an action on a dead letter: retry or discard.`);
      },
    );
  }
}

function isValueKind(kind: string): kind is StepValueKind {
  return (VALUE_KINDS as readonly string[]).includes(kind);
}

function isDeadLetterAction(action: string): action is DeadLetterAction {
  return (DEAD_LETTER_ACTIONS as readonly string[]).includes(action);
}

/** `?signals=`: the cursor of the page of a task's signals to show (the first page without it). */
function signalsCursor(query: QueryParams): string | undefined {
  return typeof query.signals === 'string' && query.signals ? query.signals : undefined;
}

/**
 * The controller at `options.path`, behind the allowed hosts' check and the host's guards (every
 * route: pages, events, values, actions), with the filter that turns refusals and failures into pages.
 */
export function mountDashboardController(options: ResolvedDashboardOptions): Type<DashboardController> {
  @Controller(options.path)
  @UseGuards(AllowedHostGuard, ...options.guards, NulCharacterGuard)
  @UseFilters(DashboardExceptionFilter)
  class MountedDashboardController extends DashboardController {}
  return MountedDashboardController;
}
