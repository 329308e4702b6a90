import { Inject, Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { WakeUpTimer } from '../notifications/wake-up-timer';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { RESOLVED_DURAFLOW_OPTIONS, SIGNAL_NAME_PATTERN, WORKFLOW_NAME_PATTERN } from '../domain/duraflow.constants';
import { ResolvedDuraflowOptions } from '../config/duraflow.options';
import { AgentTask } from '../domain/entities/agent-task.entity';
import {
  ChildWorkflowFailedError,
  InvalidPrimitiveCallError,
  InvalidSignalNameError,
  InvalidWorkflowNameError,
  RunAbortedError,
  SignalTimeoutError,
} from '../domain/errors';
import { ChildWorkflowOptions, SignalWaitOptions } from '../domain/workflow-context';
import { TaskLease } from '../lease/task-lease';
import { StepMemo } from '../persistence/step.store';
import { NO_WAKE_UP, WaitSettlement, WaitToSettle } from '../persistence/sql/settle-wait';
import { WaitStore } from '../persistence/wait.store';
import { describeError } from '../util/describe-error';
import { checkSubmitInput, checkSubmitOptions } from '../validation/call-options';
import { concurrencyKeyOf } from '../validation/flow-limits';
import { MemoizedStepRunner } from './step-runner';

/**
 * Thrown through the workflow's code once its run suspended (the task is `pending` again,
 * waiting): the run is over for this claim; it is no failure and counts no retry.
 */
export class RunSuspended extends Error {
  constructor(
    readonly taskId: string,
    readonly wakeAt: Date,
  ) {
    super(`Task ${taskId} is waiting (until ${wakeAt.toISOString()}); this run is over`);
    this.name = 'RunSuspended';
  }
}

/** The step key of the `n`-th wait (1, 2, ...) for signal `name` in a run: replays reach the same waits in the same order. */
export function signalWaitKey(name: string, n: number): string {
  return `signal:${name}#${n}`;
}

/** Builds the durable primitives of each run (ctx.sleep, waitForSignal, startChild, runChild). */
@Injectable()
export class DurablePrimitives {
  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly registry: WorkflowRegistry,
    private readonly store: WaitStore,
    private readonly wakeUps: WakeUpTimer,
  ) {}

  /** `traceContext`: the trace the task was submitted in (OpenTelemetry), which its children continue. */
  forRun(task: AgentTask, lease: TaskLease, runner: MemoizedStepRunner, traceContext: Record<string, string> | null = null): RunPrimitives {
    return new RunPrimitives(task, lease, runner, this.options, this.registry, this.store, this.wakeUps, traceContext);
  }
}

/**
 * The durable primitives of one run. Each is a `step_runs` row under its key (one namespace
 * with the steps, so a key used twice is DuplicateStepKeyError): a wait that is over returns
 * what it recorded; one that is not settles in the database under the run's claim
 * (sql/settle-wait.ts), and when it still is not over the task is suspended there and the run
 * unwinds with RunSuspended. The next claim replays the run from the top.
 */
export class RunPrimitives {
  /** Set once the run suspended: the task waits until then (NO_WAKE_UP: until a signal or a child wakes it). */
  suspendedUntil: Date | undefined;
  private readonly signalWaits = new Map<string, number>();

  constructor(
    private readonly task: AgentTask,
    private readonly lease: TaskLease,
    private readonly runner: MemoizedStepRunner,
    private readonly options: ResolvedDuraflowOptions,
    private readonly registry: WorkflowRegistry,
    private readonly store: WaitStore,
    private readonly wakeUps: WakeUpTimer,
    private readonly traceContext: Record<string, string> | null = null,
  ) {
    runner.throwIfSuspended = () => {
      if (this.suspendedUntil) throw new RunSuspended(task.id, this.suspendedUntil);
    };
  }

  async sleep(key: string, ms: number): Promise<void> {
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
      throw new InvalidPrimitiveCallError(`ctx.sleep("${key}", ${String(ms)})`, 'ms must be a finite number of milliseconds >= 0.');
    }
    return this.sleepUntilTime(key, new Date(Date.now() + ms), { ms });
  }

  async sleepUntil(key: string, date: Date | string): Promise<void> {
    const until = date instanceof Date ? date : typeof date === 'string' ? new Date(date) : new Date(NaN);
    if (Number.isNaN(until.getTime())) {
      throw new InvalidPrimitiveCallError(`ctx.sleepUntil("${key}", ${String(date)})`, 'pass a valid Date or an ISO-8601 string.');
    }
    return this.sleepUntilTime(key, until, { until: until.toISOString() });
  }

  async waitForSignal<T>(name: string, options: SignalWaitOptions = {}): Promise<T> {
    if (typeof name !== 'string' || !SIGNAL_NAME_PATTERN.test(name)) throw new InvalidSignalNameError(name);
    const timeoutMs = options?.timeoutMs;
    if (timeoutMs !== undefined && (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs < 0)) {
      throw new InvalidPrimitiveCallError(
        `ctx.waitForSignal("${name}")`,
        `timeoutMs must be a finite number >= 0, got ${String(timeoutMs)}.`,
      );
    }
    const n = (this.signalWaits.get(name) ?? 0) + 1;
    this.signalWaits.set(name, n);
    const key = signalWaitKey(name, n);
    const memo = await this.reserve(key);
    const timeout = () => new SignalTimeoutError(this.task.id, name, timeoutMs ?? null);
    if (memo?.status === 'completed') return memoOutput(memo) as T;
    if (memo?.status === 'failed') throw timeout();
    const deadline = memo?.wakeAt ?? (timeoutMs === undefined ? null : new Date(Date.now() + timeoutMs));
    const settled = await this.settle({
      stepKey: key,
      kind: 'signal',
      wakeAt: deadline,
      signalName: name,
      inputJson: JSON.stringify({ name, timeoutMs: timeoutMs ?? null }),
    });
    if (settled.outcome === 'failed') throw timeout();
    return (settled.outputUndefined ? undefined : settled.output) as T;
  }

  async startChild<TInput>(key: string, workflowName: string, input?: TInput, options?: ChildWorkflowOptions): Promise<{ id: string }> {
    const memo = await this.reserve(key);
    const id = memo ? childIdOf(memo) : await this.start(key, workflowName, input, options, false);
    this.runner.hasCompensableSteps = true;
    return { id };
  }

  async runChild<TOutput, TInput>(key: string, workflowName: string, input?: TInput, options?: ChildWorkflowOptions): Promise<TOutput> {
    const memo = await this.reserve(key);
    if (memo?.status === 'completed') return memoOutput(memo) as TOutput;
    if (memo?.status === 'failed') throw childFailure(memo.error ?? {}, childIdOf(memo), workflowName);
    if (!memo) {
      // Just started: the child cannot have ended, so the parent was suspended in the same transaction.
      await this.start(key, workflowName, input, options, true);
      this.suspendedUntil = NO_WAKE_UP;
      throw new RunSuspended(this.task.id, NO_WAKE_UP);
    }
    const childTaskId = childIdOf(memo);
    const settled = await this.settle({
      stepKey: key,
      kind: 'child',
      wakeAt: null,
      childTaskId,
      inputJson: JSON.stringify({ workflowName, childTaskId }),
    });
    if (settled.outcome === 'failed') throw childFailure(settled.error, childTaskId, workflowName);
    this.runner.hasCompensableSteps = true;
    return (settled.outputUndefined ? undefined : settled.output) as TOutput;
  }

  private async sleepUntilTime(key: string, until: Date, recorded: Record<string, unknown>): Promise<void> {
    const memo = await this.reserve(key);
    if (memo?.status === 'completed') return;
    // The first run that reached the sleep fixed its end: a replay never pushes it later.
    const wakeAt = memo?.wakeAt ?? until;
    // The common wake-up: the sleep is over, one fenced statement records it (the general
    // settle below is a transaction of several).
    if (memo && wakeAt.getTime() <= Date.now()) {
      const { taskId, claimToken } = this.lease;
      if (await this.persist(() => this.store.completeDueSleep(taskId, claimToken, key, this.runner.takeCompletionSeq()))) return;
    }
    await this.settle({ stepKey: key, kind: 'sleep', wakeAt, inputJson: JSON.stringify(recorded) });
  }

  private async start(key: string, workflowName: string, input: unknown, options: ChildWorkflowOptions | undefined, wait: boolean) {
    if (typeof workflowName !== 'string' || !WORKFLOW_NAME_PATTERN.test(workflowName)) throw new InvalidWorkflowNameError(workflowName);
    const workflow = this.registry.get(workflowName);
    const checked = checkSubmitOptions({ ...(options ?? {}), idempotencyKey: undefined });
    const inputJson = await checkSubmitInput(workflow, input, this.options);
    const concurrencyKey = concurrencyKeyOf(workflow.flow, inputJson);
    const started = await this.persist(() =>
      this.store.startChild({
        parentTaskId: this.task.id,
        claimToken: this.lease.claimToken,
        stepKey: key,
        wait,
        workflowName,
        inputJson,
        priority: checked.priority,
        scheduledAt: checked.scheduledAt,
        maxRetries: checked.maxRetries ?? workflow.maxRetries ?? this.options.maxRetries,
        idempotencyKey: `duraflow-child:${this.task.id}:${createHash('sha1').update(key).digest('hex')}`,
        completionSeq: this.runner.takeCompletionSeq(),
        workflowVersion: workflow.declaredVersion ?? null,
        concurrencyKey,
        traceContextJson: this.traceContext ? JSON.stringify(this.traceContext) : null,
      }),
    );
    if (!started) throw this.lost();
    return started.childTaskId;
  }

  /**
   * The primitive's key, reserved as a step's is, and checked by the determinism guard as a
   * step is: a recorded row is consumed (`recorded`); a primitive never recorded starts only
   * once the guard admits it and `ctx.patched`'s answers landed, so on a recovered run whose
   * path diverged no wait, signal or child is written.
   */
  private async reserve(key: string): Promise<StepMemo | undefined> {
    const memo = this.runner.reserveKey(key);
    if (memo) {
      this.runner.guard.recorded(key);
      return memo;
    }
    const admitted = this.runner.guard.admit(key);
    const markers = this.runner.patches.pending;
    if (admitted || markers) await Promise.all([admitted, markers]);
    return undefined;
  }

  /** Settles the wait in the database; suspends the run when it is not over. */
  private async settle(
    wait: Omit<WaitToSettle, 'taskId' | 'claimToken' | 'completionSeq'>,
  ): Promise<Exclude<WaitSettlement, { outcome: 'waiting' | 'lost' }>> {
    const settled = await this.persist(() =>
      this.store.settleWait({
        ...wait,
        taskId: this.task.id,
        claimToken: this.lease.claimToken,
        completionSeq: this.runner.takeCompletionSeq(),
      }),
    );
    if (settled.outcome === 'lost') throw this.lost();
    if (settled.outcome === 'waiting') {
      this.suspendedUntil = settled.wakeAt;
      if (settled.wakeAt.getTime() < NO_WAKE_UP.getTime()) this.armWakeUp(settled.wakeAt, Date.now(), settled.wakeInMs);
      throw new RunSuspended(this.task.id, settled.wakeAt);
    }
    return settled;
  }

  /**
   * Arms this process's timer for the wake-up. `receivedAt + wakeInMs` is sure never to be early
   * whatever this host's clock says (the server read its own clock `wakeInMs` before the wake-up,
   * before this reply), but it is late by the time the settle waited for a connection and its
   * reply for the event loop. So the wake-up's own time (`wake_at`, the server's clock) is armed
   * too when it is earlier: with the clocks in step (one host, or NTP) it claims the task on
   * time; a server clock behind this one makes it fire early, find nothing due, and the first
   * claims it.
   */
  private armWakeUp(wakeAt: Date, receivedAt: number, wakeInMs: number): void {
    // + 1: a Date holds whole milliseconds (wake_at's microseconds and the reply's arrival are cut).
    const certain = Math.ceil(receivedAt + wakeInMs) + 1;
    const own = wakeAt.getTime() + 1;
    this.wakeUps.wakeAt(new Date(certain));
    if (own < certain - 1) this.wakeUps.wakeAt(new Date(own));
  }

  /** A statement of the run through its lease; an unreachable database aborts the run as a checkpoint's failure does. */
  private async persist<T>(statement: () => Promise<T>): Promise<T> {
    try {
      return await this.lease.retry(statement);
    } catch (error) {
      const reason = this.lease.stoppedBecause;
      if (reason) throw new RunAbortedError(this.task.id, reason);
      this.runner.persistenceFailure = error;
      throw new RunAbortedError(this.task.id, `a wait could not be recorded (${describeError(error).message})`);
    }
  }

  /** The claim owns the task no more (cancelled, reaped): the run goes no further. */
  private lost(): RunAbortedError {
    this.lease.stop('lease-lost');
    return new RunAbortedError(this.task.id, this.lease.stoppedBecause ?? 'lease-lost');
  }
}

function memoOutput(memo: StepMemo): unknown {
  return memo.outputUndefined ? undefined : memo.output;
}

function childIdOf(memo: StepMemo): string {
  return (memo.input as { childTaskId: string }).childTaskId;
}

function childFailure(error: Record<string, unknown>, childTaskId: string, workflowName: string): ChildWorkflowFailedError {
  return new ChildWorkflowFailedError(childTaskId, workflowName, String(error.status ?? 'failed'), error.childError ?? null);
}
