import { Inject, Injectable } from '@nestjs/common';
import { viewable } from '../codec/decoded-rows';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { AgentTask } from '../domain/entities/agent-task.entity';
import { DeadLetter } from '../domain/entities/dead-letter.entity';
import { DuraflowError } from '../domain/errors';
import { SagaService } from '../services/saga.service';
import { RunTalkOverviews } from '../services/workflows/run-talk-overview';
import { SignalPage, WorkflowService } from '../services/workflow.service';
import { DASHBOARD_OPTIONS, ResolvedDashboardOptions } from './dashboard.options';
import { progressVersion } from './live-task-feed';
import { TaskFilters } from './task-filters';
import { DeadLetterListData } from './views/dead-letters.page';
import { TaskDetails } from './views/task.page';
import { TaskListData } from './views/task-list.page';

/** What the pages show, read through the library's public services only (no SQL here). */
@Injectable()
export class DashboardReader {
  constructor(
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    private readonly workflows: WorkflowService,
    private readonly saga: SagaService,
    private readonly registry: WorkflowRegistry,
    private readonly talk: RunTalkOverviews,
  ) {}

  /** The list and the counts for these filters; a filter the services refuse becomes one more problem. */
  async taskList(filters: TaskFilters, problems: string[]): Promise<TaskListData> {
    const data: TaskListData = {
      filters,
      problems,
      counts: undefined,
      heldCount: undefined,
      tasks: [],
      nextCursor: null,
      workflows: this.registry.names().sort(),
    };
    if (problems.length) return data;
    const range = { workflowName: filters.workflow, createdAfter: filters.from, createdBefore: filters.to, tags: filters.tags };
    try {
      data.counts = await this.workflows.countByStatus(range);
      data.heldCount = await this.workflows.countHeld(range);
      const page = await this.workflows.list({
        ...range,
        status: filters.status,
        held: filters.held,
        limit: this.options.pageSize,
        cursor: filters.cursor,
      });
      data.tasks = page.items.map((task) => viewableTask(task));
      data.nextCursor = page.nextCursor;
    } catch (error) {
      if (!(error instanceof DuraflowError)) throw error;
      problems.push(error.message);
    }
    return data;
  }

  /**
   * A task's page. Its progress is read first: a change that lands while the rest is read makes
   * the page's version older than what it shows, so live updates fetch it once more (never less).
   */
  async taskDetails(taskId: string, signalsAfter?: string): Promise<TaskDetails | null> {
    const progress = await this.workflows.getProgress(taskId);
    const task = progress && (await this.workflows.get(taskId));
    if (!progress || !task) return null;
    const talkStamp = await this.talk.stamp(taskId); // read before the events and streams, as progress before the rest
    const [steps, deadLetters, children, signals, logs, talk, callbacks] = await Promise.all([
      this.workflows.getStepSummaries(taskId, { previewChars: this.options.previewChars }),
      this.deadLettersOf(taskId),
      this.workflows.getChildren(taskId),
      this.signalPage(taskId, signalsAfter),
      this.workflows.getLogs(taskId, { limit: this.options.pageSize }),
      this.talk.overview(taskId, { limit: this.options.pageSize, tail: 10 }),
      this.workflows.listCallbacks(taskId),
    ]);
    return {
      task: viewableTask(task),
      steps,
      deadLetters: deadLetters.map((entry) => viewable(entry, ['error'])),
      children: children.map((child) => viewableTask(child)),
      signals: signals.items,
      signalsAfter,
      signalsNext: signals.nextCursor,
      logs,
      talk,
      callbacks,
      version: progressVersion(progress, talkStamp),
    };
  }

  /**
   * One page of the task's signals with previews only (cut in the database: no payload is read
   * whole); a cursor the service refuses shows the first page.
   */
  private async signalPage(taskId: string, after: string | undefined): Promise<SignalPage> {
    const options = { limit: this.options.pageSize, maxPayloadBytes: 0 };
    try {
      return await this.workflows.listSignals(taskId, { ...options, after });
    } catch (error) {
      if (!(error instanceof DuraflowError) || after === undefined) throw error;
      return this.workflows.listSignals(taskId, options);
    }
  }

  /** Every dead letter of one task (pages followed: a page is cut by size, not only by count). */
  async deadLettersOf(taskId: string): Promise<DeadLetter[]> {
    const entries: DeadLetter[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.saga.listDeadLetters({ taskId, limit: 1000, cursor });
      entries.push(...page.items);
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    return entries;
  }

  /** One page of the whole dead-letter queue; a cursor the service refuses becomes a problem. */
  async deadLetterList(cursor: string | undefined): Promise<DeadLetterListData> {
    try {
      const page = await this.saga.listDeadLetters({ limit: this.options.pageSize, cursor });
      return { items: page.items.map((entry) => viewable(entry, ['error'])), cursor, nextCursor: page.nextCursor, problems: [] };
    } catch (error) {
      if (!(error instanceof DuraflowError)) throw error;
      return { items: [], cursor: undefined, nextCursor: null, problems: [error.message] };
    }
  }
}

/** A task as a page shows it: a payload no configured key opens reads `[cannot decrypt]` (codec/decoded-rows.ts). */
function viewableTask<T extends AgentTask>(task: T): T {
  for (const entry of task.history ?? []) viewable(entry, ['error']);
  return viewable(task);
}
