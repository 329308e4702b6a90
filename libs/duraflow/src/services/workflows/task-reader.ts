import { Inject, Injectable, Optional } from '@nestjs/common';
import { PayloadCoder } from '../../codec/payload-coder';
import { ResolvedDuraflowOptions } from '../../config/resolved-options';
import { MAX_LIST_LIMIT, RESOLVED_DURAFLOW_OPTIONS, UUID_PATTERN } from '../../domain/duraflow.constants';
import { AgentTask } from '../../domain/entities/agent-task.entity';
import { StepRun } from '../../domain/entities/step-run.entity';
import { InvalidListOptionsError } from '../../domain/errors';
import { TaskStatus } from '../../domain/task-status';
import { StepSummary, StepSummaryOptions, TaskCountFilter, TaskCounts, TaskProgress } from '../../domain/task-summaries';
import { decodeCursor, keysetPage, listLimit } from '../../persistence/cursor';
import { DuraflowDatabase } from '../../persistence/duraflow-database';
import { decodeSignalCursor, encodeSignalCursor, SignalStore, TaskSignal } from '../../persistence/signal.store';
import { readStepSummaries } from '../../persistence/sql/read-step-summaries';
import { readTaskProgress } from '../../persistence/sql/read-task-progress';
import { StepStore } from '../../persistence/step.store';
import { TaskStore } from '../../persistence/task.store';
import { checkPreviewChars, checkTagsFilter, checkWorkflowFilter, createdRange } from '../../validation/call-options';
import { hasNul } from '../../validation/storable-text';

export interface ListTasksOptions {
  status?: TaskStatus | `${TaskStatus}`;
  workflowName?: string;
  /** Only tasks created at or after this time (a Date or an ISO-8601 string). */
  createdAfter?: Date | string;
  /** Only tasks created before this time. */
  createdBefore?: Date | string;
  /**
   * true: only tasks the determinism guard holds (pending, `heldAt` set); false: only tasks it
   * does not hold. Default: both.
   */
  held?: boolean;
  /** Only the forks of this task (`workflows.fork`), newest first. */
  forkedFrom?: string;
  /** Only tasks holding every one of these tags (an AND: `{ tenant: 'acme', plan: 'pro' }`). */
  tags?: Record<string, string>;
  /** 1..1000, default 50. */
  limit?: number;
  /** `nextCursor` of the previous page. */
  cursor?: string;
}

export interface ListSignalsOptions {
  /** 1..1000, default 50. */
  limit?: number;
  /** `nextCursor` of the previous page: the signals sent after its last one. */
  after?: string;
  /**
   * A payload larger than this many bytes (as JSON text) is left out (`payloadOmitted`, with its
   * preview and size); 0 leaves every payload out. 0..maxListPageBytes, default 64 KiB.
   */
  maxPayloadBytes?: number;
}

export interface SignalPage {
  /** In the order they were sent. */
  items: TaskSignal[];
  /** Pass as `after` for the next page; null on the last page. */
  nextCursor: string | null;
}

/** The default `maxPayloadBytes` of a page of signals. */
export const DEFAULT_SIGNAL_PAYLOAD_BYTES = 64 * 1024;

export interface TaskPage {
  items: AgentTask[];
  /** Pass to `list` for the next (older) page; null on the last page. */
  nextCursor: string | null;
}

/** An id that no task can have (not a UUID): a read answers "none" without asking the database. */
function isTaskId(id: unknown): id is string {
  return typeof id === 'string' && UUID_PATTERN.test(id);
}

/** WorkflowService's reads: a task, its steps, pages of its signals and its children, pages and counts of tasks. */
@Injectable()
export class TaskReader {
  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly db: DuraflowDatabase,
    private readonly tasks: TaskStore,
    private readonly steps: StepStore,
    private readonly signals: SignalStore,
    @Optional() private readonly coder?: PayloadCoder,
  ) {}

  async get(id: string): Promise<AgentTask | null> {
    return isTaskId(id) ? this.tasks.findTask(id) : null;
  }

  async getSteps(id: string): Promise<StepRun[]> {
    return isTaskId(id) ? this.steps.listSteps(id) : [];
  }

  async getStep(id: string, stepKey: string): Promise<StepRun | null> {
    // A key holding NUL: no step has it (PostgreSQL cannot even compare with it).
    return isTaskId(id) && typeof stepKey === 'string' && !hasNul(stepKey) ? this.steps.findStep(id, stepKey) : null;
  }

  async getStepSummaries(id: string, options: StepSummaryOptions = {}): Promise<StepSummary[]> {
    const previewChars = checkPreviewChars(options.previewChars);
    return isTaskId(id) ? readStepSummaries(this.db, id, previewChars, this.coder) : [];
  }

  async getProgress(id: string): Promise<TaskProgress | null> {
    return isTaskId(id) ? readTaskProgress(this.db, id) : null;
  }

  async listSignals(id: string, options: ListSignalsOptions = {}): Promise<SignalPage> {
    const limit = listLimit(options.limit);
    const maxPayloadBytes = options.maxPayloadBytes ?? Math.min(DEFAULT_SIGNAL_PAYLOAD_BYTES, this.options.maxListPageBytes);
    if (!Number.isSafeInteger(maxPayloadBytes) || maxPayloadBytes < 0 || maxPayloadBytes > this.options.maxListPageBytes) {
      throw new InvalidListOptionsError(
        'maxPayloadBytes',
        `must be an integer from 0 to ${this.options.maxListPageBytes} (maxListPageBytes), got ${String(options.maxPayloadBytes)}.`,
      );
    }
    const afterId = options.after === undefined ? '0' : decodeSignalCursor(options.after);
    if (!isTaskId(id)) return { items: [], nextCursor: null };
    const page = await this.signals.listSignalPage(id, { afterId, limit, maxPayloadBytes, maxBytes: this.options.maxListPageBytes });
    const last = page.signals[page.signals.length - 1];
    return { items: page.signals, nextCursor: page.more && last ? encodeSignalCursor(last.id) : null };
  }

  async getSignal(id: string, signalId: string): Promise<TaskSignal | null> {
    return isTaskId(id) && typeof signalId === 'string' && /^\d{1,18}$/.test(signalId) ? this.signals.findSignal(id, signalId) : null;
  }

  /** Every signal with its whole payload, read a page at a time. */
  async getSignals(id: string): Promise<TaskSignal[]> {
    const signals: TaskSignal[] = [];
    if (!isTaskId(id)) return signals;
    let afterId = '0';
    for (;;) {
      const page = await this.signals.listSignalPage(id, {
        afterId,
        limit: MAX_LIST_LIMIT,
        maxPayloadBytes: Number.MAX_SAFE_INTEGER,
        maxBytes: this.options.maxListPageBytes,
      });
      signals.push(...page.signals);
      if (!page.more || !page.signals.length) return signals;
      afterId = page.signals[page.signals.length - 1].id;
    }
  }

  async getChildren(id: string): Promise<AgentTask[]> {
    return isTaskId(id) ? this.tasks.listChildren(id) : [];
  }

  async list(options: ListTasksOptions = {}): Promise<TaskPage> {
    const limit = listLimit(options.limit);
    if (options.status !== undefined && !Object.values(TaskStatus).includes(options.status as TaskStatus)) {
      throw new InvalidListOptionsError('status', `must be one of ${Object.values(TaskStatus).join(', ')}.`);
    }
    if (options.held !== undefined && typeof options.held !== 'boolean') {
      throw new InvalidListOptionsError('held', 'must be true (only held tasks), false (none held) or left out.');
    }
    const page = await this.tasks.listTasks({
      status: options.status,
      workflowName: checkWorkflowFilter(options.workflowName),
      ...createdRange(options),
      held: options.held,
      forkedFrom: checkForkedFrom(options.forkedFrom),
      tags: checkTagsFilter(options.tags),
      limit,
      maxBytes: this.options.maxListPageBytes,
      after: options.cursor ? decodeCursor(options.cursor) : undefined,
    });
    return keysetPage(page, (row) => row.task);
  }

  async countByStatus(filter: TaskCountFilter = {}): Promise<TaskCounts> {
    const found = await this.tasks.countTasksByStatus(countFilter(filter));
    const counts = {} as TaskCounts;
    for (const status of Object.values(TaskStatus)) counts[status] = found.get(status) ?? 0;
    return counts;
  }

  async countHeld(filter: TaskCountFilter = {}): Promise<number> {
    return this.tasks.countHeldTasks(countFilter(filter));
  }
}

/** A count's filter, checked. @throws InvalidListOptionsError */
function countFilter(filter: TaskCountFilter) {
  return { workflowName: checkWorkflowFilter(filter.workflowName), ...createdRange(filter), tags: checkTagsFilter(filter.tags) };
}

/** `list`'s forkedFrom: a task id (one no task can have lists nothing), or InvalidListOptionsError. */
function checkForkedFrom(forkedFrom: unknown): string | undefined {
  if (forkedFrom === undefined) return undefined;
  if (typeof forkedFrom !== 'string' || !isTaskId(forkedFrom)) {
    throw new InvalidListOptionsError('forkedFrom', 'must be a task id (a UUID) or left out.');
  }
  return forkedFrom;
}
