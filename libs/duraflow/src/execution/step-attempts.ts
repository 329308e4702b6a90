import { RunScope, runScopeStorage } from '../decorators/run-scope';
import { resolveStepOptions } from '../config/resolved-options';
import { RegisteredWorkflow } from '../discovery/workflow.registry';
import { RunAbortedError, StepTimeoutError } from '../domain/errors';
import { StepContext, StepOptions } from '../domain/workflow-context';
import { TaskLease } from '../lease/task-lease';
import { observeStepAttempt } from '../observability/run-observer';
import { LogBatch } from '../persistence/run-log.store';
import { ChunkBatch } from '../persistence/stream.store';
import { CompletedStep, StepMemo } from '../persistence/step.store';
import { describeError } from '../util/describe-error';
import { OutputLimits, outputToJson } from '../util/json';
import { DuraflowClock } from '../domain/engine-clock';
import { effectKey } from '../util/effect-key';
import { runAttempt } from './attempt';
import { checkStorableJson, storableJson } from '../validation/storable-text';
import { retryDelayMs } from './backoff';
import { CheckpointBatcher } from './checkpoint-batcher';
import { RunKernel } from './run-kernel';
import { crashRun, StepFaults, StepPoint } from './step-faults';

/** The step that failed for good, so the task's error can name it. */
export interface StepFailure {
  error: unknown;
  stepKey: string;
  attempts: number;
}

/**
 * The steps of one live run, once the kernel let them start: one attempt at a time (each raced
 * against the run's stop and the step's timeout, observed), retried with backoff, each outcome a
 * checkpoint written through the run's lease and the checkpoint batcher (fenced on the claim).
 * A lease that got old is confirmed before each attempt's body starts.
 */
export class StepAttempts {
  /** Set when a checkpoint could not be written (database unreachable): the run must not decide anything. */
  persistenceFailure: unknown;
  /** The step that failed for good, if one did. */
  lastFailure: StepFailure | undefined;
  /** The run's scope (workflow-context.ts), which a step body runs inside so that @Step methods find the run. */
  scope: RunScope | undefined;
  /** Runs just before each checkpoint's statement (the run's pending log lines are written there). */
  beforeCheckpoint: (() => Promise<void>) | undefined;
  /** The run's pending log lines, taken to go in a step completion's own statement. */
  takeLogs: (() => LogBatch | undefined) | undefined;
  /** The stream chunks the attempt wrote (run-talk.ts), taken to go in the step completion's own statement. */
  takeChunks: ((key: string, attempt: number) => ChunkBatch | undefined) | undefined;

  constructor(
    private readonly workflow: RegisteredWorkflow,
    private readonly lease: TaskLease,
    private readonly kernel: RunKernel,
    private readonly checkpoints: CheckpointBatcher,
    private readonly outputLimits: OutputLimits,
    /** The engine's clock (a retry's backoff) and the testing kit's faults (none in production). */
    private readonly runtime: { clock: DuraflowClock; faults: StepFaults },
  ) {}

  /** A step's attempts after those recorded in `previous` (its failed attempts in earlier runs); resolves with what a replay would return. */
  async run<T>(key: string, fn: (step: StepContext) => T | Promise<T>, options: StepOptions | undefined, previous?: StepMemo): Promise<T> {
    const resolved = resolveStepOptions(options, this.workflow.step, `step "${key}"`);
    let attempt = previous?.attempt ?? 0;
    let rowMayExist = previous !== undefined;
    const { clock, faults } = this.runtime;
    const point: StepPoint = { workflow: this.workflow.name, step: key, taskId: this.lease.taskId, claimToken: this.lease.claimToken };
    if (faults.crashes(point, 'before')) throw crashRun(this.lease, point, 'before');
    const body = faults.body(point, fn);
    for (let retry = 0; ; retry++) {
      await this.lease.confirmIfOld(); // a lease that got old is confirmed before the body starts
      this.kernel.throwIfStopped();
      attempt++;
      const startedAt = new Date(clock.now());
      if (resolved.recordStart) {
        await this.recordStart(key, attempt, startedAt);
        rowMayExist = true;
      }
      let value: T;
      try {
        value = await observeStepAttempt(this.lease, key, attempt, () => this.attempt(key, body, attempt, resolved.timeout));
      } catch (error) {
        this.kernel.throwIfStopped();
        await this.recordFailedAttempt(key, error, attempt, startedAt);
        rowMayExist = true;
        if (retry >= resolved.retries) {
          this.lastFailure = { error, stepKey: key, attempts: retry + 1 };
          throw error;
        }
        await clock.sleep(retryDelayMs(resolved.backoff, retry + 1), this.lease.signal).catch(() => this.kernel.throwIfStopped());
        continue;
      }
      const output = await this.recordCompletion(key, value, { attempt, startedAt, attempts: retry + 1, rowMayExist });
      if (faults.crashes(point, 'after')) throw crashRun(this.lease, point, 'after');
      return output;
    }
  }

  /** `ctx.patched`'s answer as a completed step row with no compensation, fenced like any checkpoint. */
  writePatchMarker(key: string, patched: boolean): Promise<void> {
    return this.checkpoint(() => this.checkpoints.stepCompleted(this.completed(key, JSON.stringify(patched), null, 1, new Date()), false));
  }

  /** `recordStart`: the step's row written `running` before the body runs, fenced like any checkpoint. */
  private recordStart(stepKey: string, attempt: number, startedAt: Date): Promise<void> {
    const { taskId, claimToken } = this.lease;
    return this.checkpoint(() => this.checkpoints.stepStarted({ taskId, claimToken, stepKey, attempt, startedAt }));
  }

  private recordFailedAttempt(key: string, error: unknown, attempt: number, startedAt: Date): Promise<void> {
    const { taskId, claimToken } = this.lease;
    const errorJson = storableJson(JSON.stringify({ ...describeError(error), stepKey: key, attempt }));
    return this.checkpoint(() => this.checkpoints.stepFailed({ taskId, claimToken, stepKey: key, errorJson, attempt, startedAt }));
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
      checkStorableJson(outputJson, `The output of step "${key}"`);
    } catch (error) {
      this.lastFailure = { error, stepKey: key, attempts: run.attempts };
      throw error;
    }
    const compensationFn = this.workflow.compensations.get(key)?.name ?? null;
    const step = this.completed(key, outputJson ?? null, compensationFn, run.attempt, run.startedAt);
    const chunks = this.takeChunks?.(key, run.attempt);
    const logs = chunks ? undefined : this.takeLogs?.(); // with chunks, the lines go just before (beforeCheckpoint)
    await this.checkpoint(() => this.checkpoints.stepCompleted(step, run.rowMayExist, logs, chunks), !logs);
    if (compensationFn) this.kernel.compensable = true;
    return (outputJson === undefined ? undefined : JSON.parse(outputJson)) as T;
  }

  private completed(
    key: string,
    outputJson: string | null,
    compensationFn: string | null,
    attempt: number,
    startedAt: Date,
  ): CompletedStep {
    const { taskId, claimToken } = this.lease;
    return {
      taskId,
      claimToken,
      stepKey: key,
      outputJson,
      compensationFn,
      attempt,
      startedAt,
      completionSeq: this.kernel.takeCompletionSeq(),
    };
  }

  /** One attempt, raced against the run's stop and the step's timeout, inside the step's scope. */
  private attempt<T>(key: string, fn: (step: StepContext) => T | Promise<T>, attempt: number, timeout?: number): Promise<T> {
    const runStep = this.scope!.runStep;
    const taskId = this.lease.taskId;
    return runAttempt(
      (handle) => {
        const context: StepContext = {
          attempt,
          get effectKey() {
            return effectKey(taskId, key);
          },
          get signal() {
            return handle.signal;
          },
        };
        return runScopeStorage.run({ runStep, step: { key, context } }, () => fn(context));
      },
      this.lease.signal,
      timeout,
      () => new StepTimeoutError(key, timeout!, attempt),
    );
  }

  /** A checkpoint through the lease; a run whose claim is lost, or that cannot reach the database, goes no further. */
  private async checkpoint(write: () => Promise<boolean>, flushLogs = true): Promise<void> {
    let landed: boolean;
    try {
      if (flushLogs) await this.beforeCheckpoint?.();
      landed = await this.lease.write(write);
    } catch (error) {
      this.kernel.throwIfStopped();
      this.persistenceFailure = error;
      throw new RunAbortedError(this.lease.taskId, `a checkpoint could not be written (${describeError(error).message})`);
    }
    if (!landed) this.kernel.throwIfStopped();
  }
}
