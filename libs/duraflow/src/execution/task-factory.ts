import { Inject, Injectable } from '@nestjs/common';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { RegisteredWorkflow, WorkflowRegistry } from '../discovery/workflow.registry';
import { RESOLVED_DURAFLOW_OPTIONS, WORKFLOW_NAME_PATTERN } from '../domain/duraflow.constants';
import { AgentTask } from '../domain/entities/agent-task.entity';
import { InvalidWorkflowNameError } from '../domain/errors';
import { childIdempotencyKey } from '../domain/reserved-keys';
import { RunObserver } from '../observability/run-observer';
import { SqlExecutor } from '../persistence/duraflow-database';
import { CreatedTask, NewTask, NewTasks } from '../persistence/lifecycle/create-tasks';
import { ForkOutcome, NewFork } from '../persistence/lifecycle/fork-task';
import { TaskTransitions } from '../persistence/lifecycle/task-transitions';
import { checkSubmitInput, checkSubmitManyOptions, checkSubmitOptions, CheckedSubmitOptions } from '../validation/call-options';
import { concurrencyKeyOf } from '../validation/flow-limits';
import { checkVersionOption } from '../validation/version-option';
import { forkOfRow } from './fork-of-row';
import { GroupCommit } from './group-commit';

/** At most this many pooled submits share one statement. */
const CREATES_PER_STATEMENT = 100;

/** The options a task is created with, as a caller may pass them (checked by the factory). */
export interface TaskOptions {
  priority?: number;
  scheduledAt?: Date | string;
  maxRetries?: number;
  idempotencyKey?: string;
  /** The workflow version to start (one this process registers); default the newest. */
  version?: number;
  /** The task's tags (validation/tags.ts); a child given none takes its parent's. */
  tags?: Record<string, string>;
}

/** Whose task it is: a caller's submit (its trace continues in the run), a parent's child, a schedule's tick, or an operator's fork of a task from one of its steps. */
export type TaskOrigin =
  | { kind: 'submit' }
  | { kind: 'child'; parentTaskId: string; parentStepKey: string; traceContextJson: string | null }
  | { kind: 'schedule' }
  | { kind: 'fork'; taskId: string; fromStep: string }
  | { kind: 'event' };

/**
 * The one way a task is made: submit, submitMany, a run's child, a schedule's tick, a fork, a
 * published event's (events/: one per event, or per debounce or batch). Every value is checked before anything is
 * written: the name, the version, the options, the input against the workflow's DTO and the
 * module's limits, and the concurrency key of a limited workflow; the defaults are applied here
 * (max retries: the call's, the workflow's, the module's). Creating is the lifecycle's create move.
 */
@Injectable()
export class TaskFactory {
  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly registry: WorkflowRegistry,
    private readonly observer: RunObserver,
    private readonly transitions: TaskTransitions,
  ) {}

  /**
   * A task of workflow `name`, checked and ready to create; nothing written.
   * @throws InvalidWorkflowNameError, UnknownWorkflowError, UnknownWorkflowVersionError, InvalidSubmitOptionsError,
   *   InputValidationError, NotSerializableError, InputTooLargeError, InvalidConcurrencyKeyError
   */
  async prepare(name: string, input: unknown, options: TaskOptions = {}, origin: TaskOrigin = { kind: 'submit' }): Promise<NewTask> {
    const workflow = this.workflow(name, origin.kind === 'submit' || origin.kind === 'fork' ? options?.version : undefined);
    const checked = checkSubmitOptions(origin.kind === 'child' ? { ...(options ?? {}), idempotencyKey: undefined } : (options ?? {}));
    const inputJson = await checkSubmitInput(workflow, input, this.options);
    return {
      ...this.common(workflow, checked, origin),
      inputJson,
      idempotencyKey: origin.kind === 'child' ? childIdempotencyKey(origin.parentTaskId, origin.parentStepKey) : checked.idempotencyKey,
      concurrencyKey: this.concurrencyKey(name, inputJson),
      parentTaskId: origin.kind === 'child' ? origin.parentTaskId : null,
      parentStepKey: origin.kind === 'child' ? origin.parentStepKey : null,
      forkedFrom: origin.kind === 'fork' ? { taskId: origin.taskId, fromStep: origin.fromStep } : null,
      // A child given no tags takes its parent's (read in the create's INSERT); any other task has its own or none.
      tags: checked.tags ?? (origin.kind === 'child' ? null : {}),
    };
  }

  /**
   * A published event's task for a subscribing workflow this process does not register (a node
   * that only publishes): the subscription's version and max retries, the input checked as JSON
   * within the module's limits (the DTO is the registering nodes'). Nothing written.
   */
  async prepareForSubscriber(
    name: string,
    input: unknown,
    subscriber: { workflowVersion: number | null; maxRetries: number },
  ): Promise<NewTask> {
    const inputJson = await checkSubmitInput({ name, unknownInputProperties: 'strip' }, input, this.options);
    return {
      workflowName: name,
      inputJson,
      priority: 0,
      scheduledAt: null,
      maxRetries: subscriber.maxRetries,
      idempotencyKey: null,
      traceContextJson: this.observer.captureTraceContext(),
      workflowVersion: subscriber.workflowVersion,
      concurrencyKey: null,
      parentTaskId: null,
      parentStepKey: null,
      forkedFrom: null,
      tags: {},
    };
  }

  /**
   * Many tasks of workflow `name` (submitMany), each input checked as `prepare` checks it (an
   * error names the index of the input); no idempotency key. Nothing written.
   */
  async prepareMany(name: string, inputs: unknown[], options: Omit<TaskOptions, 'idempotencyKey'> = {}): Promise<NewTasks> {
    const workflow = this.workflow(name, options?.version);
    const checked = checkSubmitManyOptions(inputs, options ?? {});
    const inputsJson: string[] = [];
    for (const [index, input] of inputs.entries()) inputsJson.push(await checkSubmitInput(workflow, input, this.options, index));
    const limited = this.registry.get(name).flow;
    return {
      ...this.common(workflow, checked, { kind: 'submit' }),
      inputsJson,
      concurrencyKeys: limited ? inputsJson.map((json) => this.concurrencyKey(name, json)) : null,
      tags: checked.tags ?? {},
    };
  }

  /**
   * A fork of `original` from `fromStep` with the original's input and version, copied from its
   * row (execution/fork-of-row.ts: no registration needed, so the command line makes the same
   * fork); the fork continues the caller's trace. Nothing written: `fork` creates it.
   */
  prepareForkOfRow(original: AgentTask, fromStep: string): NewFork {
    return forkOfRow(original, fromStep, this.observer.captureTraceContext());
  }

  /** The create move (the task holding its idempotency key when there is one), on `executor` when given (a caller's transaction). */
  create(task: NewTask, executor?: SqlExecutor): Promise<CreatedTask> {
    return this.transitions.create(task, executor);
  }

  /**
   * The create move on the pool, group-committed (group-commit.ts) as checkpoints are: a lone
   * submit is written at once, alone; the submits that arrive while a statement is in flight share
   * the next one (one round trip, one commit, one NOTIFY), so many callers enqueue at the rate of
   * a few commits, not one each. Resolves when its task's statement committed.
   */
  createOnPool(task: NewTask): Promise<CreatedTask> {
    return this.pooledCreates.submit(task);
  }

  private readonly pooledCreates = new GroupCommit<NewTask, CreatedTask>({
    write: (tasks) => this.transitions.createTogether(tasks),
    maxBatch: CREATES_PER_STATEMENT,
    start: 'now',
  });

  /** The create move of a fork (`prepare` with a fork's origin) with the copy of its original's steps, in one transaction. */
  fork(task: NewFork): Promise<ForkOutcome> {
    return this.transitions.fork(task);
  }

  /** The create move for many tasks of one workflow, in one statement. */
  createMany(batch: NewTasks, executor?: SqlExecutor): Promise<AgentTask[]> {
    return this.transitions.createMany(batch, executor);
  }

  private workflow(name: string, version: unknown): RegisteredWorkflow {
    if (typeof name !== 'string' || !WORKFLOW_NAME_PATTERN.test(name)) throw new InvalidWorkflowNameError(name);
    return this.registry.get(name, checkVersionOption(version));
  }

  /** What every task of the workflow gets from the checked options and its origin. */
  private common(workflow: RegisteredWorkflow, checked: CheckedSubmitOptions, origin: TaskOrigin) {
    return {
      workflowName: workflow.name,
      priority: checked.priority,
      scheduledAt: checked.scheduledAt,
      maxRetries: checked.maxRetries ?? workflow.maxRetries ?? this.options.maxRetries,
      // A submit's (or a fork's) run continues the caller's trace; a child's, its parent's; a tick starts none.
      traceContextJson:
        origin.kind === 'submit' || origin.kind === 'fork' || origin.kind === 'event'
          ? this.observer.captureTraceContext()
          : origin.kind === 'child'
            ? origin.traceContextJson
            : null,
      workflowVersion: workflow.declaredVersion ?? null,
    };
  }

  /** Flow control's key: the claim applies the limits of the newest registered version (background/task-claimer.ts). */
  private concurrencyKey(name: string, inputJson: string): string | null {
    return concurrencyKeyOf(this.registry.get(name).flow, inputJson);
  }
}
