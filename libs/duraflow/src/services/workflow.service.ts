import { Inject, Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { LeaseHeartbeat } from '../background/lease-heartbeat';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { RESOLVED_DURAFLOW_OPTIONS, UUID_PATTERN, WORKFLOW_NAME_PATTERN } from '../domain/duraflow.constants';
import { ResolvedDuraflowOptions } from '../config/duraflow.options';
import { AgentTask } from '../domain/entities/agent-task.entity';
import { StepRun } from '../domain/entities/step-run.entity';
import {
  IdempotencyKeyConflictError,
  InvalidListOptionsError,
  InvalidWorkflowNameError,
  TaskAlreadyFinishedError,
  TaskNotFoundError,
  TaskNotHeldError,
  WaitForTimeoutError,
} from '../domain/errors';
import { SagaExecutor } from '../execution/saga-executor';
import { isTerminalStatus, TaskStatus } from '../domain/task-status';
import { StepSummary, StepSummaryOptions, TaskCountFilter, TaskCounts, TaskProgress } from '../domain/task-summaries';
import { TaskLeases } from '../lease/task-leases';
import { TaskNotifications } from '../notifications/task-notifications';
import { RunObserver } from '../observability/run-observer';
import { decodeCursor, keysetPage, listLimit } from '../persistence/cursor';
import { DuraflowDatabase } from '../persistence/duraflow-database';
import { resumeHeldTask } from '../persistence/sql/hold-task';
import { readTaskProgress } from '../persistence/sql/read-task-progress';
import { StepStore } from '../persistence/step.store';
import { TaskStore } from '../persistence/task.store';
import { ScheduleInfo } from '../domain/schedule-options';
import { describeSchedules } from '../schedules/describe-schedules';
import { ScheduleRegistry } from '../schedules/schedule.registry';
import { ScheduleStore } from '../schedules/schedule.store';
import { TaskSignal, WaitStore } from '../persistence/wait.store';
import { checkSignal } from '../validation/signal';
import {
  checkPreviewChars,
  checkSubmitInput,
  checkSubmitManyOptions,
  checkSubmitOptions,
  checkWaitOptions,
  createdRange,
} from '../validation/call-options';
import { checkVersionOption } from '../validation/version-option';
import { concurrencyKeyOf } from '../validation/flow-limits';

export interface SubmitOptions {
  /** Higher runs first. Default 0. */
  priority?: number;
  /** Not claimed before this time. */
  scheduledAt?: Date | string;
  /** Recoveries after a worker died before the task fails. Default: the workflow's, else the module's (3). */
  maxRetries?: number;
  /**
   * Submitting again with the same key (for the same workflow) and the same input returns the
   * first task and creates nothing; with another input it throws IdempotencyKeyConflictError.
   */
  idempotencyKey?: string;
  /** Create the task in the caller's transaction: it exists (and is claimable) only if that commits. */
  manager?: EntityManager;
  /**
   * The workflow version to start (one this process registers); default: the newest registered.
   * An unknown version throws UnknownWorkflowVersionError and writes nothing.
   */
  version?: number;
}

/** What `submitWithResult` resolves with. */
export interface SubmitResult {
  task: AgentTask;
  /** False when an earlier submit with the same idempotency key (and input) created the task. */
  created: boolean;
}

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
  /** 1..1000, default 50. */
  limit?: number;
  /** `nextCursor` of the previous page. */
  cursor?: string;
}

export interface TaskPage {
  items: AgentTask[];
  /** Pass to `list` for the next (older) page; null on the last page. */
  nextCursor: string | null;
}

export interface CancelOptions {
  /**
   * Also undo the task's completed steps (their compensations, newest first) before it ends
   * `cancelled`; a compensation that fails for good goes to the dead-letter queue. The call
   * resolves when the rollback is over. Default false: stop the task, undo nothing.
   */
  compensate?: boolean;
}

/** What `signal` resolves with. */
export interface SignalReceipt {
  signalId: string;
  taskId: string;
  name: string;
  /** The task was waiting for a signal of this name and was made runnable at once. */
  wokeTask: boolean;
}

export interface WaitForOptions {
  /** 0 to 2,147,483,647 ms (about 24.8 days). Default 30 s. */
  timeoutMs?: number;
  /** Fallback poll while no notification arrives: 10 to 2,147,483,647 ms. Default 200 ms. */
  pollIntervalMs?: number;
}

/** Submit, inspect, list, cancel and await workflow runs. */
@Injectable()
export class WorkflowService {
  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly registry: WorkflowRegistry,
    private readonly db: DuraflowDatabase,
    private readonly tasks: TaskStore,
    private readonly steps: StepStore,
    private readonly notifications: TaskNotifications,
    private readonly saga: SagaExecutor,
    private readonly leases: TaskLeases,
    private readonly heartbeat: LeaseHeartbeat,
    private readonly observer: RunObserver,
    private readonly schedules: ScheduleRegistry,
    private readonly scheduleStore: ScheduleStore,
    private readonly waits: WaitStore,
  ) {}

  /**
   * Creates a `pending` task of workflow `name`. Everything is checked before anything is
   * written: a bad name, an unknown workflow, input failing the workflow's DTO, input that
   * is not JSON or too large, or a bad option throws a typed error and writes nothing.
   * With an `idempotencyKey` already used: the first task when the input is the same,
   * IdempotencyKeyConflictError when it is not.
   */
  async submit<TInput = unknown>(name: string, input?: TInput, options: SubmitOptions = {}, manager?: EntityManager): Promise<AgentTask> {
    return (await this.submitWithResult(name, input, options, manager)).task;
  }

  /**
   * `submit`, telling a new task (`created: true`, e.g. HTTP 201) from the one an earlier submit
   * with the same idempotency key and input created (`created: false`, e.g. 200).
   */
  async submitWithResult<TInput = unknown>(
    name: string,
    input?: TInput,
    options: SubmitOptions = {},
    manager?: EntityManager,
  ): Promise<SubmitResult> {
    if (typeof name !== 'string' || !WORKFLOW_NAME_PATTERN.test(name)) throw new InvalidWorkflowNameError(name);
    const workflow = this.registry.get(name, checkVersionOption(options?.version));
    const opts = checkSubmitOptions(options ?? {});
    const inputJson = await checkSubmitInput(workflow, input, this.options);
    // The claim applies the limits of the newest registered version (background/task-claimer.ts).
    const concurrencyKey = concurrencyKeyOf(this.registry.get(name).flow, inputJson);

    const { task, created, sameInput } = await this.tasks.insertTask(this.db.forManager(manager ?? options?.manager), {
      workflowName: name,
      inputJson,
      priority: opts.priority,
      scheduledAt: opts.scheduledAt,
      maxRetries: opts.maxRetries ?? workflow.maxRetries ?? this.options.maxRetries,
      idempotencyKey: opts.idempotencyKey,
      traceContextJson: this.observer.captureTraceContext(), // the run continues the caller's trace
      workflowVersion: workflow.declaredVersion ?? null,
      concurrencyKey,
    });
    if (!sameInput) throw new IdempotencyKeyConflictError(name, opts.idempotencyKey!, task.id);
    return { task, created };
  }

  /**
   * Creates many `pending` tasks of workflow `name` in one statement (one NOTIFY for all), in
   * input order. Every input is checked first, as `submit` checks it: one bad input throws its
   * typed error (naming its index) and writes nothing. Options apply to every task;
   * `idempotencyKey` is not accepted here (use `submit` per task for that). At most 10,000.
   */
  async submitMany<TInput = unknown>(
    name: string,
    inputs: TInput[],
    options: Omit<SubmitOptions, 'idempotencyKey'> = {},
  ): Promise<AgentTask[]> {
    if (typeof name !== 'string' || !WORKFLOW_NAME_PATTERN.test(name)) throw new InvalidWorkflowNameError(name);
    const workflow = this.registry.get(name, checkVersionOption(options?.version));
    const opts = checkSubmitManyOptions(inputs, options ?? {});
    const inputsJson: string[] = [];
    for (const [index, input] of inputs.entries()) inputsJson.push(await checkSubmitInput(workflow, input, this.options, index));
    const { flow } = this.registry.get(name); // the limits the claim applies: the newest version's
    const concurrencyKeys = flow ? inputsJson.map((json) => concurrencyKeyOf(flow, json)) : undefined;
    if (!inputsJson.length) return [];
    return this.tasks.insertTasks(this.db.forManager(options?.manager), {
      workflowName: name,
      inputsJson,
      priority: opts.priority,
      scheduledAt: opts.scheduledAt,
      maxRetries: opts.maxRetries ?? workflow.maxRetries ?? this.options.maxRetries,
      traceContextJson: this.observer.captureTraceContext(),
      workflowVersion: workflow.declaredVersion ?? null,
      concurrencyKeys,
    });
  }

  /** The task, or null when no task has this id. */
  async get(id: string): Promise<AgentTask | null> {
    if (typeof id !== 'string' || !UUID_PATTERN.test(id)) return null;
    return this.tasks.findTask(id);
  }

  /** The task's step checkpoints: completed ones in completion order, then the unfinished. */
  async getSteps(id: string): Promise<StepRun[]> {
    if (typeof id !== 'string' || !UUID_PATTERN.test(id)) return [];
    return this.steps.listSteps(id);
  }

  /**
   * Newest first, optionally by status and workflow, paged with a keyset cursor. A page holds at
   * most `limit` tasks and at most `maxListPageBytes` of them (always at least one): follow
   * `nextCursor`, not the count of items, to know whether more are left.
   */
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
      workflowName: options.workflowName,
      ...createdRange(options),
      held: options.held,
      limit,
      maxBytes: this.options.maxListPageBytes,
      after: options.cursor ? decodeCursor(options.cursor) : undefined,
    });
    return keysetPage(page, (row) => row.task);
  }

  /**
   * How many tasks are in each status (every status present, 0 when none), optionally of one
   * workflow and created in a time range. It reads every task in range: narrow it on large tables.
   *
   * @throws InvalidListOptionsError for a time that is not a Date or an ISO-8601 string
   */
  async countByStatus(filter: TaskCountFilter = {}): Promise<TaskCounts> {
    const found = await this.tasks.countTasksByStatus({ workflowName: filter.workflowName, ...createdRange(filter) });
    const counts = {} as TaskCounts;
    for (const status of Object.values(TaskStatus)) counts[status] = found.get(status) ?? 0;
    return counts;
  }

  /**
   * How many tasks the determinism guard holds (they are among the `pending` of countByStatus),
   * with the same workflow and time filters. Find them with `list({ held: true })`.
   *
   * @throws InvalidListOptionsError for a time that is not a Date or an ISO-8601 string
   */
  async countHeld(filter: TaskCountFilter = {}): Promise<number> {
    return this.tasks.countHeldTasks({ workflowName: filter.workflowName, ...createdRange(filter) });
  }

  /** One step of the task by its key, with its whole input and output; null when there is none. */
  async getStep(id: string, stepKey: string): Promise<StepRun | null> {
    if (typeof id !== 'string' || !UUID_PATTERN.test(id) || typeof stepKey !== 'string') return null;
    return this.steps.findStep(id, stepKey);
  }

  /**
   * The task's steps in `getSteps` order, with previews of their input and output (the first
   * `previewChars` characters, cut in the database) instead of the values: an overview of a task
   * whose steps return MiBs stays small.
   *
   * @throws InvalidListOptionsError for `previewChars` outside 1..1,048,576
   */
  async getStepSummaries(id: string, options: StepSummaryOptions = {}): Promise<StepSummary[]> {
    const previewChars = checkPreviewChars(options.previewChars);
    if (typeof id !== 'string' || !UUID_PATTERN.test(id)) return [];
    return this.steps.listStepSummaries(id, previewChars);
  }

  /**
   * Counts of the task's steps, attempts, compensations and dead letters with its status, in one
   * cheap statement (no input or output read): what to poll to learn that a task changed.
   * Null when no task has this id.
   */
  async getProgress(id: string): Promise<TaskProgress | null> {
    if (typeof id !== 'string' || !UUID_PATTERN.test(id)) return null;
    return readTaskProgress(this.db, id);
  }

  /**
   * Cancels a pending or running task (a running one stops before its next step, and its
   * current step's signal aborts). With `{ compensate: true }` the completed steps are undone
   * first, in this process, under a claim of its own (heartbeated, so a crash here leaves a
   * rollback that a worker resumes). A finished task cannot be cancelled.
   *
   * @throws TaskNotFoundError, TaskAlreadyFinishedError
   */
  async cancel(id: string, options: CancelOptions = {}): Promise<AgentTask> {
    if (typeof id !== 'string' || !UUID_PATTERN.test(id)) throw new TaskNotFoundError(String(id));
    if (options?.compensate) return this.cancelAndCompensate(id);
    const { task, previousStatus } = await this.tasks.cancelTask(id);
    if (!previousStatus) throw new TaskNotFoundError(id);
    if (!task) throw new TaskAlreadyFinishedError(id, previousStatus);
    // Children belong to their parent: the unfinished ones below it are cancelled too.
    await this.waits.cancelDescendants([id], { includeRoots: false, compensate: false });
    return task;
  }

  /**
   * Runs a task the determinism guard holds again, on the code deployed now: clears the hold and
   * its NonDeterminismError and wakes the workers. Call it once a deploy that takes the run's
   * recorded path is out (if the code still diverges, the guard holds the task again).
   *
   * @throws TaskNotFoundError, TaskNotHeldError
   */
  async resume(id: string): Promise<AgentTask> {
    if (typeof id !== 'string' || !UUID_PATTERN.test(id)) throw new TaskNotFoundError(String(id));
    const resumed = await resumeHeldTask(this.db, id);
    if (resumed) return resumed;
    const task = await this.tasks.findTask(id);
    if (!task) throw new TaskNotFoundError(id);
    throw new TaskNotHeldError(id, task.status);
  }

  /**
   * Sends signal `name` to the task: kept until a `ctx.waitForSignal(name)` of the task takes it
   * (signals of one name are taken in the order they were sent, one per wait); a task waiting
   * for it is woken at once. Everything is checked before anything is written.
   *
   * @throws TaskNotFoundError, TaskAlreadyFinishedError, InvalidSignalNameError,
   *   NotSerializableError (a payload JSON cannot hold), SignalPayloadTooLargeError
   */
  async signal(taskId: string, name: string, payload?: unknown): Promise<SignalReceipt> {
    const payloadJson = checkSignal(name, payload, this.options);
    if (typeof taskId !== 'string' || !UUID_PATTERN.test(taskId)) throw new TaskNotFoundError(String(taskId));
    const sent = await this.waits.sendSignal(taskId, name, payloadJson ?? null);
    if (!sent.status) throw new TaskNotFoundError(taskId);
    if (!sent.signalId) throw new TaskAlreadyFinishedError(taskId, sent.status, 'signalled');
    return { signalId: sent.signalId, taskId, name, wokeTask: sent.woke };
  }

  /** The signals sent to the task, in the order they were sent, with the wait that took each. */
  async getSignals(id: string): Promise<TaskSignal[]> {
    if (typeof id !== 'string' || !UUID_PATTERN.test(id)) return [];
    return this.waits.listSignals(id);
  }

  /** The tasks the task started with `ctx.startChild` / `ctx.runChild`, oldest first. */
  async getChildren(id: string): Promise<AgentTask[]> {
    if (typeof id !== 'string' || !UUID_PATTERN.test(id)) return [];
    return this.waits.listChildren(id);
  }

  private async cancelAndCompensate(id: string): Promise<AgentTask> {
    const current = await this.tasks.findTask(id);
    if (!current) throw new TaskNotFoundError(id);
    // Its compensations run in this process: one that does not register the workflow would send
    // every step to the dead-letter queue. UnknownWorkflowError, and nothing written.
    this.registry.get(current.workflowName);
    const { task, previousStatus, claimToken } = await this.tasks.takeOverForCancelRollback(id, this.options.workerId);
    if (!previousStatus) throw new TaskNotFoundError(id);
    if (!task) throw new TaskAlreadyFinishedError(id, previousStatus);
    if (claimToken) {
      const lease = this.leases.open(id, claimToken);
      this.heartbeat.hold(lease);
      try {
        await this.observer.observe({ task, claimToken }, lease, () => this.saga.rollback(task, lease, 'cancelled'), true);
      } finally {
        this.heartbeat.release(lease);
      }
    }
    // The children the rollback did not reach (still running, waited for) are cancelled and undone too.
    await this.waits.cancelDescendants([id], { includeRoots: false, compensate: true });
    return claimToken ? ((await this.tasks.findTask(id)) ?? task) : task;
  }

  /**
   * Resolves with the task once it reaches a terminal status.
   *
   * @throws InvalidWaitOptionsError (before anything is read), TaskNotFoundError, WaitForTimeoutError
   */
  async waitFor(id: string, options: WaitForOptions = {}): Promise<AgentTask> {
    const { timeoutMs, pollIntervalMs } = checkWaitOptions(options ?? {});
    const deadline = Date.now() + timeoutMs;
    let notified: boolean | undefined;
    let wake: () => void = () => undefined;
    const unsubscribe = this.notifications.onFinished((taskId) => {
      if (taskId !== id) return;
      notified = true;
      wake();
    });
    try {
      for (;;) {
        notified = false;
        const task = await this.get(id);
        if (!task) throw new TaskNotFoundError(id);
        if (isTerminalStatus(task.status)) return task;
        const remaining = deadline - Date.now();
        if (remaining <= 0) throw new WaitForTimeoutError(id, timeoutMs, task.status);
        // A notification that came while the task was read is not waited for again.
        if (notified) continue;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(pollIntervalMs, remaining));
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = () => undefined;
      }
    } finally {
      unsubscribe();
    }
  }

  /**
   * This application's schedules, by name: each one's cron and time zone, its next tick, the
   * newest tick done by any node and the task of the newest tick that started one.
   */
  async listSchedules(): Promise<ScheduleInfo[]> {
    return describeSchedules(this.schedules.all(), this.scheduleStore);
  }
}
