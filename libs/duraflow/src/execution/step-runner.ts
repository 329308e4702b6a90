import { RegisteredWorkflow } from '../discovery/workflow.registry';
import { resolveStepOptions } from '../config/duraflow.options';
import {
  DuplicateStepKeyError,
  InvalidStepKeyError,
  NestedStepError,
  RunAbortedError,
  StepOutsideRunError,
  StepTimeoutError,
} from '../domain/errors';
import { StepContext, StepOptions, StepRunner } from '../domain/workflow-context';
import { TaskLease } from '../lease/task-lease';
import { CompletedStep, StepMemo } from '../persistence/step.store';
import { retryDelayMs } from './backoff';
import { describeError } from '../util/describe-error';
import { OutputLimits, outputToJson } from '../util/json';
import { sleep } from '../util/sleep';
import { observeStepAttempt } from '../observability/run-observer';
import { runAttempt } from './attempt';
import { CheckpointBatcher } from './checkpoint-batcher';
import { DeterminismGuard } from './determinism-guard';
import { RunPatches } from './run-patches';
import { RunScope, runScopeStorage } from '../decorators/run-scope';

/** The step that failed for good, so the task's error can name it. */
export interface StepFailure {
  error: unknown;
  stepKey: string;
  attempts: number;
}

/** What the step runner of one run works with. */
export interface StepRunnerOptions {
  workflow: RegisteredWorkflow;
  /** The run's claim: every checkpoint is written through it. */
  lease: TaskLease;
  /** The task's steps from earlier runs, by step key (empty for a task never claimed before). */
  memos: Map<string, StepMemo>;
  checkpoints: CheckpointBatcher;
  outputLimits: OutputLimits;
}

/**
 * The step runner of one run: memoizes through `step_runs`, retries with backoff, enforces
 * timeouts, and writes every checkpoint through the checkpoint batcher, fenced on the run's
 * lease. `ctx.step.run` and @Step methods both end up in `runStep`.
 */
export class MemoizedStepRunner implements StepRunner {
  private readonly workflow: RegisteredWorkflow;
  private readonly lease: TaskLease;
  private readonly memos: Map<string, StepMemo>;
  private readonly checkpoints: CheckpointBatcher;
  private readonly outputLimits: OutputLimits;
  private readonly usedKeys = new Set<string>();
  /** The completion_seq the next completed step gets. */
  private nextCompletionSeq: number;
  private closed = false;
  /** Set when a checkpoint could not be written (database unreachable): the run must not decide anything. */
  persistenceFailure: unknown;
  lastFailure: StepFailure | undefined;
  /** Set by the run's durable primitives: once the run suspended, no step may start. */
  throwIfSuspended?: () => void;
  /** Some completed step of this task has a compensation that has not run: a failure rolls back. */
  hasCompensableSteps: boolean;
  readonly scope: RunScope = { runStep: (key, fn, options) => this.runStep(key, fn, options) };
  /** The run's path against the one it recorded (execution/determinism-guard.ts). */
  readonly guard: DeterminismGuard;
  /** `ctx.patched(id)`, answered and recorded (execution/run-patches.ts). */
  readonly patches: RunPatches;

  constructor({ workflow, lease, memos, checkpoints, outputLimits }: StepRunnerOptions) {
    this.workflow = workflow;
    this.lease = lease;
    this.memos = memos;
    this.checkpoints = checkpoints;
    this.outputLimits = outputLimits;
    this.hasCompensableSteps = [...memos.values()].some((memo) => memo.compensable);
    this.nextCompletionSeq = Math.max(0, ...[...memos.values()].map((memo) => memo.completionSeq ?? 0)) + 1;
    this.guard = new DeterminismGuard(lease.taskId, workflow.name, memos);
    this.patches = new RunPatches(memos, this.guard, (key, patched) => this.recordPatchMarker(key, patched));
  }

  run<T>(key: string, fn: (step: StepContext) => T | Promise<T>, options?: StepOptions): Promise<T> {
    return this.runStep(key, fn, options);
  }

  /**
   * A durable primitive (sleep, signal wait, child) takes `key` in the run's one key namespace,
   * with the checks a step's key gets. Returns what an earlier run recorded under it.
   */
  reserveKey(key: string): StepMemo | undefined {
    this.enterStep(key, () => undefined);
    this.throwIfStopped();
    return this.memos.get(key);
  }

  /** The completion_seq for a durable primitive that completes now. */
  takeCompletionSeq(): number {
    return this.nextCompletionSeq++;
  }

  /** After the run function returned, no step may start. */
  close(): void {
    this.closed = true;
  }

  async runStep<T>(key: string, fn: (step: StepContext) => T | Promise<T>, options?: StepOptions): Promise<T> {
    this.enterStep(key, fn);
    this.throwIfSuspended?.();
    const memo = this.memos.get(key);
    if (memo?.status === 'completed') {
      this.guard.recorded(key);
      return (memo.outputUndefined ? undefined : memo.output) as T;
    }
    this.throwIfStopped();
    // A step never completed starts once the guard admits it and `ctx.patched`'s answers landed.
    const admitted = this.guard.admit(key);
    const markers = this.patches.pending;
    if (admitted || markers) await Promise.all([admitted, markers]);

    const resolved = resolveStepOptions(options, this.workflow.step, `step "${key}"`);
    let attempt = memo?.attempt ?? 0;
    let rowMayExist = memo !== undefined;
    for (let retry = 0; ; retry++) {
      await this.lease.confirmIfOld(); // a lease that got old is confirmed before the body starts
      this.throwIfStopped();
      attempt++;
      const startedAt = new Date();
      let value: T;
      try {
        value = await observeStepAttempt(this.lease, key, attempt, () => this.attempt(key, fn, attempt, resolved.timeout));
      } catch (error) {
        this.throwIfStopped();
        await this.recordFailedAttempt(key, error, attempt, startedAt);
        rowMayExist = true;
        if (retry >= resolved.retries) {
          this.lastFailure = { error, stepKey: key, attempts: retry + 1 };
          throw error;
        }
        await sleep(retryDelayMs(resolved.backoff, retry + 1), this.lease.signal).catch(() => this.throwIfStopped());
        continue;
      }
      return this.recordCompletion(key, value, { attempt, startedAt, attempts: retry + 1, rowMayExist });
    }
  }

  /** A step call that may start: a valid key used once in this run, outside any other step, before the run returned. */
  private enterStep(key: string, fn: unknown): void {
    if (typeof key !== 'string' || key.length === 0 || key.length > 255) throw new InvalidStepKeyError(key);
    if (typeof fn !== 'function') throw new TypeError(`ctx.step.run("${key}", fn): fn must be a function.`);
    if (this.closed) throw new StepOutsideRunError(key);
    const parent = runScopeStorage.getStore()?.step;
    if (parent) throw new NestedStepError(key, parent.key);
    if (this.usedKeys.has(key)) throw new DuplicateStepKeyError(this.workflow.name, key);
    this.usedKeys.add(key);
  }

  private recordFailedAttempt(key: string, error: unknown, attempt: number, startedAt: Date): Promise<void> {
    return this.checkpoint(() =>
      this.checkpoints.stepFailed({
        taskId: this.lease.taskId,
        claimToken: this.lease.claimToken,
        stepKey: key,
        errorJson: JSON.stringify({ ...describeError(error), stepKey: key, attempt }),
        attempt,
        startedAt,
      }),
    );
  }

  /** Checkpoints the step's output; resolves with the value a replay would return, so a run behaves the same before and after a crash. */
  private async recordCompletion<T>(
    key: string,
    value: T,
    run: { attempt: number; startedAt: Date; attempts: number; rowMayExist: boolean },
  ): Promise<T> {
    let outputJson: string | undefined;
    try {
      outputJson = outputToJson(value, this.outputLimits, this.workflow.name, key);
    } catch (error) {
      this.lastFailure = { error, stepKey: key, attempts: run.attempts };
      throw error;
    }
    const compensationFn = this.workflow.compensations.get(key)?.name ?? null;
    const completed: CompletedStep = {
      taskId: this.lease.taskId,
      claimToken: this.lease.claimToken,
      stepKey: key,
      outputJson: outputJson ?? null,
      compensationFn,
      attempt: run.attempt,
      startedAt: run.startedAt,
      completionSeq: this.nextCompletionSeq++,
    };
    await this.checkpoint(() => this.checkpoints.stepCompleted(completed, run.rowMayExist));
    if (compensationFn) this.hasCompensableSteps = true;
    return (outputJson === undefined ? undefined : JSON.parse(outputJson)) as T;
  }

  /** `ctx.patched`'s answer as a completed step row with no compensation, fenced like any checkpoint. */
  private recordPatchMarker(key: string, patched: boolean): Promise<void> {
    const marker: CompletedStep = {
      taskId: this.lease.taskId,
      claimToken: this.lease.claimToken,
      stepKey: key,
      outputJson: JSON.stringify(patched),
      compensationFn: null,
      attempt: 1,
      startedAt: new Date(),
      completionSeq: this.nextCompletionSeq++,
    };
    return this.checkpoint(() => this.checkpoints.stepCompleted(marker, false));
  }

  /** One attempt, raced against the run's stop and the step's timeout, inside the step's scope. */
  private attempt<T>(key: string, fn: (step: StepContext) => T | Promise<T>, attempt: number, timeout?: number): Promise<T> {
    return runAttempt(
      (handle) => {
        const context: StepContext = {
          attempt,
          get signal() {
            return handle.signal;
          },
        };
        return runScopeStorage.run({ runStep: this.scope.runStep, step: { key, context } }, () => fn(context));
      },
      this.lease.signal,
      timeout,
      () => new StepTimeoutError(key, timeout!, attempt),
    );
  }

  /** A checkpoint through the lease; a run whose claim is lost, or that cannot reach the database, goes no further. */
  private async checkpoint(write: () => Promise<boolean>): Promise<void> {
    let landed: boolean;
    try {
      landed = await this.lease.write(write);
    } catch (error) {
      this.throwIfStopped();
      this.persistenceFailure = error;
      throw new RunAbortedError(this.lease.taskId, `a checkpoint could not be written (${describeError(error).message})`);
    }
    if (!landed) this.throwIfStopped();
  }

  private throwIfStopped(): void {
    const reason = this.lease.stoppedBecause;
    if (reason) throw new RunAbortedError(this.lease.taskId, reason);
  }
}
