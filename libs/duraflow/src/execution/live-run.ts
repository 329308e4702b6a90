import { Inject, Injectable } from '@nestjs/common';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { ResolvedRunLogOptions } from '../config/run-log.options';
import { runScopeStorage } from '../decorators/run-scope';
import { RegisteredWorkflow, WorkflowRegistry } from '../discovery/workflow.registry';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { DURAFLOW_CLOCK, DuraflowClock } from '../domain/engine-clock';
import { AgentTask } from '../domain/entities/agent-task.entity';
import { TaskLease } from '../lease/task-lease';
import { WakeUpTimer } from '../notifications/wake-up-timer';
import { traceContextOf } from '../observability/tracing';
import { ClaimedTask } from '../persistence/lifecycle/claim-tasks';
import { TaskTransitions } from '../persistence/lifecycle/task-transitions';
import { RunLogStore } from '../persistence/run-log.store';
import { CallbackStore } from '../persistence/callback.store';
import { CallbackOpener } from './callback-opener';
import { StepMemo, StepStore } from '../persistence/step.store';
import { OutputLimits } from '../util/json';
import { CheckpointBatcher } from './checkpoint-batcher';
import { RunLog } from './run-log';
import { RunTalk, RunTalks } from './run-talk';
import { RunKernel } from './run-kernel';
import { RunWaits } from './run-waits';
import { StepAttempts, StepFailure } from './step-attempts';
import { DURAFLOW_STEP_FAULTS, StepFaults } from './step-faults';
import { TaskFactory } from './task-factory';
import { BuiltContext, buildWorkflowContext } from './workflow-context';

/** Opens the live run of each claimed task: its recorded steps read, its kernel, steps, waits and context built. */
@Injectable()
export class LiveRuns {
  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly registry: WorkflowRegistry,
    private readonly steps: StepStore,
    private readonly checkpoints: CheckpointBatcher,
    private readonly transitions: TaskTransitions,
    private readonly factory: TaskFactory,
    private readonly wakeUps: WakeUpTimer,
    private readonly logs: RunLogStore,
    private readonly talks: RunTalks,
    private readonly callbackStore: CallbackStore,
    @Inject(DURAFLOW_CLOCK) private readonly clock: DuraflowClock,
    @Inject(DURAFLOW_STEP_FAULTS) private readonly faults: StepFaults,
  ) {}

  /** The run of a claimed task (its workflow at the task's version); a fresh task has no step to read. */
  async open({ task, fresh, traceContext }: ClaimedTask, lease: TaskLease): Promise<LiveRun> {
    const workflow = this.registry.get(task.workflowName, task.workflowVersion);
    const memos = fresh ? new Map<string, StepMemo>() : await lease.retry(() => this.steps.loadStepMemos(task.id));
    return new LiveRun(task, workflow, lease, memos, {
      checkpoints: this.checkpoints,
      outputLimits: this.outputLimits,
      transitions: this.transitions,
      factory: this.factory,
      wakeUps: this.wakeUps,
      logs: this.logs,
      logLimits: this.options.logs,
      talks: this.talks,
      callbacks: new CallbackOpener(this.callbackStore, this.options.callbacks, () => this.clock.now()),
      traceContextJson: childTraceContext(traceContext),
      clock: this.clock,
      faults: this.faults,
    });
  }

  /** What a step or a workflow may return (`maxOutputBytes`, `maxJsonDepth`). */
  get outputLimits(): OutputLimits {
    return { maxBytes: this.options.maxOutputBytes, maxDepth: this.options.maxJsonDepth };
  }
}

interface LiveRunParts {
  checkpoints: CheckpointBatcher;
  outputLimits: OutputLimits;
  transitions: TaskTransitions;
  factory: TaskFactory;
  wakeUps: WakeUpTimer;
  logs: RunLogStore;
  logLimits: ResolvedRunLogOptions;
  talks: RunTalks;
  callbacks: CallbackOpener;
  traceContextJson: string | null;
  clock: DuraflowClock;
  faults: StepFaults;
}

/**
 * One execution of a claimed task by this worker: the run kernel (run-kernel.ts) with the live
 * effects (its steps' attempts and checkpoints, its waits settled in the database) behind the
 * workflow's context. What the executor reads once the workflow returned or threw.
 */
export class LiveRun {
  readonly kernel: RunKernel;
  /** `ctx.log`'s lines, written before each checkpoint and wait, and at the run's end. */
  readonly log: RunLog;
  private readonly attempts: StepAttempts;
  private readonly waits: RunWaits;
  /** `ctx.setEvent`, `ctx.writeStream`, `ctx.closeStream`. */
  private readonly talk: RunTalk;
  private readonly context: BuiltContext;
  private readonly lease: TaskLease;

  constructor(
    task: AgentTask,
    private readonly workflow: RegisteredWorkflow,
    lease: TaskLease,
    memos: Map<string, StepMemo>,
    parts: LiveRunParts,
  ) {
    this.kernel = new RunKernel(
      { taskId: task.id, workflowName: task.workflowName },
      memos,
      (key, patched) => this.attempts.writePatchMarker(key, patched),
      () => lease.stoppedBecause,
    );
    this.attempts = new StepAttempts(workflow, lease, this.kernel, parts.checkpoints, parts.outputLimits, parts);
    this.waits = new RunWaits({ ...parts, lease, kernel: this.kernel });
    this.talk = parts.talks.open(task, lease, this.kernel);
    // Waits recorded as waiting are not on the guard's replayed path: a body line before one was written with it.
    const waiting = new Set([...memos.values()].filter((memo) => memo.status === 'waiting').map((memo) => memo.stepKey));
    const replaying = () => this.kernel.guard.replaying || waiting.size > 0;
    this.log = new RunLog(
      { taskId: task.id, workflowName: task.workflowName, claimToken: lease.claimToken, replaying },
      parts.logs,
      parts.logLimits,
    );
    const flushed = (key?: string) => (key !== undefined && waiting.delete(key) ? Promise.resolve() : this.flushLog());
    this.context = buildWorkflowContext(
      task,
      this.kernel,
      {
        runStep: (key, fn, options, previous) => this.attempts.run(key, fn, options, previous),
        sleep: (key, wakeAt, recorded, input) => flushed(key).then(() => this.waits.sleep(key, wakeAt, recorded, input)),
        waitForSignal: (key, name, deadline, timeoutMs) =>
          flushed(key).then(() => this.waits.waitForSignal(key, name, deadline, timeoutMs)),
        startChild: (key, name, input, options) => flushed().then(() => this.waits.startChild(key, name, input, options)),
        runChild: (key, name, input, options, recorded) =>
          flushed(key).then(() => this.waits.runChild(key, name, input, options, recorded)),
        log: this.log.api,
        talk: this.talk,
        openCallback: (key, timeoutMs) => parts.callbacks.open(lease, key, timeoutMs),
        callbackExpired: (callbackId) => parts.callbacks.expired(lease, callbackId),
      },
      lease.signal,
      () => parts.clock.now(),
    );
    this.attempts.scope = this.context.scope;
    this.attempts.beforeCheckpoint = () => flushed();
    this.attempts.takeLogs = () => this.log.take();
    this.attempts.takeChunks = (key, attempt) => this.talk.takeStepChunks(key, attempt);
    this.lease = lease;
  }

  /** Calls the workflow inside its run scope (where @Step methods find the run). */
  call(): Promise<unknown> {
    return runScopeStorage.run(this.context.scope, () => this.workflow.run(this.context.ctx));
  }

  /** Writes the run's queued stream chunks and pending log lines through its lease (fenced on its claim; a lost claim writes nothing). */
  async flushLog(): Promise<void> {
    await this.talk.drain(); // the body's queued stream chunks first (run-talk.ts)
    await this.lease.write(() => this.log.flush());
  }

  /** A checkpoint or a wait could not be written (the database was unreachable): the run decides nothing. */
  get persistenceFailure(): unknown {
    return this.attempts.persistenceFailure ?? this.waits.persistenceFailure ?? this.talk.persistenceFailure;
  }

  /** The step that failed for good, if one did. */
  get lastFailure(): StepFailure | undefined {
    return this.attempts.lastFailure;
  }
}

/** The trace a run's children continue: its task's, cut to `traceparent`/`tracestate` (a row stored before may carry more). */
function childTraceContext(stored: Record<string, string> | null | undefined): string | null {
  const kept = stored && typeof stored === 'object' ? traceContextOf(stored) : null;
  return kept ? JSON.stringify(kept) : null;
}
