import { Inject, Injectable } from '@nestjs/common';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { ResolvedDuraflowOptions } from '../config/duraflow.options';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { AgentTask, TaskError } from '../domain/entities/agent-task.entity';
import { DuraflowError, OutputTooLargeError } from '../domain/errors';
import { TaskStatus } from '../domain/task-status';
import { RunOutcome } from '../domain/run-outcome';
import { WorkflowContext } from '../domain/workflow-context';
import { TaskLease } from '../lease/task-lease';
import { StepMemo, StepStore } from '../persistence/step.store';
import { ClaimedTask, TaskStore } from '../persistence/task.store';
import { DuraflowLogger } from '../observability/duraflow-logger';
import { noteRunFailure } from '../observability/run-observer';
import { describeError } from '../util/describe-error';
import { outputToJson } from '../util/json';
import { CheckpointBatcher } from './checkpoint-batcher';
import { CompletionBatcher } from './completion-batcher';
import { RunHold } from './run-hold';
import { DurablePrimitives } from './durable-primitives';
import { runScopeStorage } from '../decorators/run-scope';
import { SagaExecutor } from './saga-executor';
import { MemoizedStepRunner } from './step-runner';

/** The slot a run holds in its worker while its code runs. */
export interface RunSlot {
  /** The run's code is over and only its outcome is left to write: the worker may start its next task meanwhile. */
  release(): void;
}

/**
 * Runs one claimed task to its end: loads its memoized steps, calls the workflow, and
 * records the outcome fenced on the claim. A run that fails for good with steps to undo
 * goes through the saga; a task claimed in the middle of a rollback resumes the rollback.
 * A run that was stopped (cancelled, taken over, handed back) or could not reach the
 * database records nothing: the database keeps the last state it owned, and the reaper or
 * the next claim carries on from there.
 */
@Injectable()
export class TaskExecutor {
  private readonly logger = new DuraflowLogger();

  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly registry: WorkflowRegistry,
    private readonly tasks: TaskStore,
    private readonly steps: StepStore,
    private readonly saga: SagaExecutor,
    private readonly completions: CompletionBatcher,
    private readonly checkpoints: CheckpointBatcher,
    private readonly hold: RunHold,
    private readonly primitives: DurablePrimitives,
  ) {}

  async execute({ task, fresh, traceContext }: ClaimedTask, lease: TaskLease, slot: RunSlot): Promise<RunOutcome> {
    if (task.rollbackReason) return this.saga.rollback(task, lease, task.rollbackReason);
    const workflow = this.registry.get(task.workflowName, task.workflowVersion);
    const memos = fresh ? new Map<string, StepMemo>() : await lease.retry(() => this.steps.loadStepMemos(task.id));
    const outputLimits = { maxBytes: this.options.maxOutputBytes, maxDepth: this.options.maxJsonDepth };
    const runner = new MemoizedStepRunner({ workflow, lease, memos, checkpoints: this.checkpoints, outputLimits });
    const waits = this.primitives.forRun(task, lease, runner, traceContext ?? null);
    const ctx: WorkflowContext = {
      runId: task.id,
      workflowName: task.workflowName,
      input: task.input,
      step: { run: (key, fn, options) => runner.run(key, fn, options) },
      attempt: (task.retryCount ?? 0) + 1,
      signal: lease.signal,
      patched: (patchId) => runner.patches.patched(patchId),
      deprecatePatch: (patchId) => runner.patches.deprecatePatch(patchId),
      sleep: (key, ms) => waits.sleep(key, ms),
      sleepUntil: (key, date) => waits.sleepUntil(key, date),
      waitForSignal: (name, options) => waits.waitForSignal(name, options),
      startChild: (key, name, input, options) => waits.startChild(key, name, input, options),
      runChild: (key, name, input, options) => waits.runChild(key, name, input, options),
    };

    let output: unknown;
    await lease.confirmIfOld(); // a claim that waited (prefetch, a stalled loop) is confirmed before user code
    if (lease.stoppedBecause) return 'stopped';
    try {
      output = await runScopeStorage.run(runner.scope, () => workflow.run(ctx));
    } catch (error) {
      runner.close();
      if (waits.suspendedUntil) return 'suspended';
      if (lease.stoppedBecause) return 'stopped';
      if (runner.persistenceFailure) return 'unrecorded';
      if (runner.guard.diverged) return this.hold.hold(task, lease, slot, runner.guard.diverged);
      return this.fail(task, lease, slot, runner, this.taskError(error, runner));
    }
    runner.close();
    // The workflow caught the suspension and returned: the task waits all the same.
    if (waits.suspendedUntil) return 'suspended';
    const diverged = runner.guard.finish();
    if (diverged) return this.hold.hold(task, lease, slot, diverged);

    let outputJson: string | undefined;
    try {
      outputJson = outputToJson(output, outputLimits, task.workflowName);
    } catch (error) {
      // OUTPUT_TOO_LARGE keeps its code; anything else JSON cannot hold is OUTPUT_NOT_SERIALIZABLE.
      const code = error instanceof OutputTooLargeError ? error.code : 'OUTPUT_NOT_SERIALIZABLE';
      return this.fail(task, lease, slot, runner, { ...this.taskError(error, runner), code });
    }
    try {
      slot.release(); // the worker may claim the next task while this completion commits
      const landed = await lease.writeOutcome(() => this.completions.complete(task.id, lease.claimToken, outputJson ?? null));
      return landed ? 'completed' : 'stopped';
    } catch (error) {
      if (lease.stoppedBecause) return 'stopped';
      this.logger.warn(
        `Task ${task.id} finished but its completion could not be recorded (${describeError(error).message}); it will be recovered.`,
        { taskId: task.id, workflow: task.workflowName },
      );
      return 'unrecorded';
    }
  }

  /** The run failed for good: undo its completed steps if it has any to undo, else end `failed`. */
  private fail(task: AgentTask, lease: TaskLease, slot: RunSlot, runner: MemoizedStepRunner, error: TaskError): Promise<RunOutcome> {
    noteRunFailure(lease, error);
    if (runner.hasCompensableSteps) return this.saga.rollback(task, lease, 'failed', { error });
    return this.recordFailure(task, lease, slot, error);
  }

  private async recordFailure(task: AgentTask, lease: TaskLease, slot: RunSlot, error: TaskError): Promise<RunOutcome> {
    slot.release(); // as for a completion: the slot is free while the failure commits
    try {
      const landed = await lease.writeOutcome(() =>
        this.tasks.finishTaskWithError(task.id, lease.claimToken, TaskStatus.FAILED, JSON.stringify(error)),
      );
      if (!landed) return 'stopped';
      this.logger.warn(`Task ${task.id} (${task.workflowName}) ended failed: ${error.code}`, {
        taskId: task.id,
        workflow: task.workflowName,
        stepKey: error.stepKey,
        code: error.code,
      });
      return 'failed';
    } catch (dbError) {
      if (lease.stoppedBecause) return 'stopped';
      this.logger.warn(
        `Task ${task.id} failed but the failure could not be recorded (${describeError(dbError).message}); it will be recovered.`,
        { taskId: task.id, workflow: task.workflowName },
      );
      return 'unrecorded';
    }
  }

  private taskError(error: unknown, runner: MemoizedStepRunner): TaskError {
    const described = describeError(error);
    const failure = runner.lastFailure?.error === error ? runner.lastFailure : undefined;
    if (failure) {
      return { ...described, code: described.code ?? 'STEP_FAILED', stepKey: failure.stepKey, attempts: failure.attempts };
    }
    return { ...described, code: error instanceof DuraflowError ? error.code : (described.code ?? 'WORKFLOW_FAILED') };
  }
}
