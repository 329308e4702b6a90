import { Injectable, Optional } from '@nestjs/common';
import { PayloadCoder } from '../codec/payload-coder';
import { PATCH_MARKER_PREFIX } from '../domain/reserved-keys';
import { CompletedStep, FailedStepAttempt, StartedStepAttempt, StepStore, UNIQUE_VIOLATION } from '../persistence/step.store';
import { LogBatch, RunLogStore } from '../persistence/run-log.store';
import { ChunkBatch, StreamStore } from '../persistence/stream.store';
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
    private readonly streams: StreamStore,
    @Optional() private readonly coder?: PayloadCoder,
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
  stepCompleted(step: CompletedStep, rowMayExist = false, logs?: LogBatch, chunks?: ChunkBatch): Promise<boolean> {
    // With a codec, the output is encoded here, once, whichever statement writes it (a patch
    // marker's true/false is the engine's, read by SQL: read-deploy-status.ts).
    if (this.coder?.encoding && !step.stepKey.startsWith(PATCH_MARKER_PREFIX))
      step = { ...step, outputJson: this.coder.encodeJson(step.taskId, 'step_output', step.outputJson) };
    // A step that wrote stream chunks: its checkpoint and its chunks in one statement of their own.
    if (chunks) return this.streams.upsertCompletedStepWithChunks(step, chunks);
    // A step with log lines: its checkpoint and its lines in one statement of their own.
    if (logs) return this.logs.upsertCompletedStepWithLogs(step, logs);
    return rowMayExist ? this.steps.upsertCompletedStep(step) : this.group.submit(step);
  }

  /** An attempt of a step failed: true once written, false when the claim no longer owns the task. */
  stepFailed(attempt: FailedStepAttempt): Promise<boolean> {
    if (this.coder?.encoding) attempt = { ...attempt, errorJson: this.coder.encodeJson(attempt.taskId, 'error', attempt.errorJson) };
    return this.steps.recordStepFailed(attempt);
  }

  /** An attempt of a step starts (`recordStart`): true once its `running` row is written, false when the claim no longer owns the task. */
  stepStarted(attempt: StartedStepAttempt): Promise<boolean> {
    return this.steps.recordStepStarted(attempt);
  }
}
