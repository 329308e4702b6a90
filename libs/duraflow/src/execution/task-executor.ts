import { Injectable } from '@nestjs/common';
import { TaskError } from '../domain/entities/agent-task.entity';
import { DuraflowError, OutputTooLargeError, PayloadUnreadableError } from '../domain/errors';
import { RunOutcome } from '../domain/run-outcome';
import { AgentTask } from '../domain/entities/agent-task.entity';
import { TaskLease } from '../lease/task-lease';
import { DuraflowLogger } from '../observability/duraflow-logger';
import { ClaimedTask } from '../persistence/lifecycle/claim-tasks';
import { describeError } from '../util/describe-error';
import { outputToJson } from '../util/json';
import { checkStorableJson } from '../validation/storable-text';
import { LiveRun, LiveRuns } from './live-run';
import { RunOutcomes, RunSlot } from './run-outcomes';
import { SagaExecutor } from './saga-executor';

/**
 * Runs one claimed task to its end: opens its live run (its memoized steps read), calls the
 * workflow, and records the outcome fenced on the claim (run-outcomes.ts). A run that fails for
 * good with steps to undo goes through the saga; a task claimed in the middle of a rollback
 * resumes the rollback. A run that was stopped (cancelled, taken over, handed back), suspended
 * at a wait, or could not reach the database records nothing: the database keeps the last state
 * it owned, and the reaper or the next claim carries on from there.
 */
@Injectable()
export class TaskExecutor {
  private readonly logger = new DuraflowLogger();

  constructor(
    private readonly runs: LiveRuns,
    private readonly outcomes: RunOutcomes,
    private readonly saga: SagaExecutor,
  ) {}

  async execute(claimed: ClaimedTask, lease: TaskLease, slot: RunSlot): Promise<RunOutcome> {
    const { task } = claimed;
    if (task.rollbackReason) return this.saga.rollback(task, lease, task.rollbackReason);
    // An input no configured key opens fails this task alone (PAYLOAD_UNREADABLE), before its run is built.
    const unreadable = unreadableInput(task);
    if (unreadable) return this.outcomes.fail(task, lease, slot, false, { ...describeError(unreadable), code: unreadable.code });
    const run = await this.runs.open(claimed, lease);
    await lease.confirmIfOld(); // a claim that waited (prefetch, a stalled loop) is confirmed before user code
    if (lease.stoppedBecause) return 'stopped';
    let output: unknown;
    try {
      output = await run.call();
    } catch (error) {
      run.kernel.close();
      if (run.kernel.suspendedUntil) return 'suspended';
      await flushLog(run);
      if (lease.stoppedBecause) return 'stopped';
      if (run.persistenceFailure) return this.unrecorded(task, run.persistenceFailure);
      if (run.kernel.guard.diverged) return this.outcomes.hold(task, lease, slot, run.kernel.guard.diverged);
      return this.outcomes.fail(task, lease, slot, run.kernel.compensable, taskError(error, run));
    }
    run.kernel.close();
    await flushLog(run);
    if (run.persistenceFailure) return this.unrecorded(task, run.persistenceFailure); // its stream chunks could not be written
    // The workflow caught the suspension and returned: the task waits all the same.
    if (run.kernel.suspendedUntil) return 'suspended';
    const diverged = run.kernel.guard.finish();
    if (diverged) return this.outcomes.hold(task, lease, slot, diverged);
    let outputJson: string | undefined;
    try {
      outputJson = outputToJson(output, this.runs.outputLimits, task.workflowName);
      checkStorableJson(outputJson, `The output of workflow "${task.workflowName}"`);
    } catch (error) {
      // OUTPUT_TOO_LARGE keeps its code; anything else JSON cannot hold is OUTPUT_NOT_SERIALIZABLE.
      const code = error instanceof OutputTooLargeError ? error.code : 'OUTPUT_NOT_SERIALIZABLE';
      return this.outcomes.fail(task, lease, slot, run.kernel.compensable, { ...taskError(error, run), code });
    }
    return this.outcomes.complete(task, lease, slot, outputJson ?? null);
  }

  /** A statement of the run could not be written: nothing decided, the task left to recovery, and said so. */
  private unrecorded(task: AgentTask, failure: unknown): RunOutcome {
    this.logger.warn(
      `Task ${task.id} (${task.workflowName}) stopped: a write of its run failed (${describeError(failure).message}); it will be recovered.`,
      { taskId: task.id, workflow: task.workflowName },
    );
    return 'unrecorded';
  }
}

/**
 * The run's last log lines, written before its outcome (fenced on its claim). A line that cannot
 * be written is not worth the outcome: the outcome's own write reports the database's state.
 */
async function flushLog(run: LiveRun): Promise<void> {
  await run.flushLog().catch(() => undefined);
}

/** The codec's error when the task's input cannot be decoded (codec/decoded-rows.ts decodes it when read). */
function unreadableInput(task: AgentTask): PayloadUnreadableError | null {
  try {
    void task.input;
    return null;
  } catch (error) {
    if (error instanceof PayloadUnreadableError) return error;
    throw error;
  }
}

/** The task's error for a run that failed: the step that failed for good, or the workflow's own error. */
function taskError(error: unknown, run: LiveRun): TaskError {
  const described = describeError(error);
  const failure = run.lastFailure?.error === error ? run.lastFailure : undefined;
  if (failure) return { ...described, code: described.code ?? 'STEP_FAILED', stepKey: failure.stepKey, attempts: failure.attempts };
  return { ...described, code: error instanceof DuraflowError ? error.code : (described.code ?? 'WORKFLOW_FAILED') };
}
