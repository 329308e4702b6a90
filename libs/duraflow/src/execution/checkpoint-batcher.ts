import { Injectable } from '@nestjs/common';
import { CompletedStep, FailedStepAttempt, StartedStepAttempt, StepStore, UNIQUE_VIOLATION } from '../persistence/step.store';
import { LogBatch, RunLogStore } from '../persistence/run-log.store';
import { GroupCommit } from './group-commit';

/**
 * The step checkpoints of this process's runs go through here (a step's completion or failed
 * attempt, a patch marker; a wait settles through the lifecycle, lifecycle/settle-wait.ts), and
 * here it is decided how each is written. A step's first completion goes through group commit across the runs: a lone one is
 * written at once, and those that arrive while it commits go together in the next statement
 * (one commit for many runs' steps); a completion whose row may exist already (a failed
 * attempt was written) is an upsert of its own, as is each row of a batch that hit an existing
 * one. Every row is fenced on its own run's claim, and each run waits until its own checkpoint
 * committed before its next step starts.
 */
@Injectable()
export class CheckpointBatcher {
  private readonly group: GroupCommit<CompletedStep, boolean>;

  constructor(
    private readonly steps: StepStore,
    private readonly logs: RunLogStore,
  ) {
    this.group = new GroupCommit({
      maxBatch: 100,
      start: 'now',
      write: async (batch) => {
        try {
          return await steps.insertCompletedSteps(batch);
        } catch (error) {
          // A row already exists (a run that wrote this step before and lost the reply): the
          // others must not fail with it, so each is written on its own, as an upsert.
          if ((error as { code?: string }).code !== UNIQUE_VIOLATION) throw error;
          const results: boolean[] = [];
          for (const step of batch) results.push(await steps.upsertCompletedStep(step));
          return results;
        }
      },
    });
  }

  /**
   * A step completed: true once written, false when nothing was (the claim no longer owns the
   * task, or the step was completed already). `rowMayExist`: an attempt of it was written before.
   */
  stepCompleted(step: CompletedStep, rowMayExist = false, logs?: LogBatch): Promise<boolean> {
    // A step with log lines: its checkpoint and its lines in one statement of their own.
    if (logs) return this.logs.upsertCompletedStepWithLogs(step, logs);
    return rowMayExist ? this.steps.upsertCompletedStep(step) : this.group.submit(step);
  }

  /** An attempt of a step failed: true once written, false when the claim no longer owns the task. */
  stepFailed(attempt: FailedStepAttempt): Promise<boolean> {
    return this.steps.recordStepFailed(attempt);
  }

  /** An attempt of a step starts (`recordStart`): true once its `running` row is written, false when the claim no longer owns the task. */
  stepStarted(attempt: StartedStepAttempt): Promise<boolean> {
    return this.steps.recordStepStarted(attempt);
  }
}
