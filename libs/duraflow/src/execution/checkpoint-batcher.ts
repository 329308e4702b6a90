import { Injectable } from '@nestjs/common';
import { CompletedStep, StepStore, UNIQUE_VIOLATION } from '../persistence/step.store';
import { GroupCommit } from './group-commit';

/**
 * Group commit for step checkpoints across the runs of this process: a lone checkpoint is
 * written at once, and those that arrive while it commits go together in the next statement
 * (one commit for many runs' steps). Every row is fenced on its own run's claim, and each run
 * waits until its own checkpoint committed before its next step starts.
 */
@Injectable()
export class CheckpointBatcher {
  private readonly group: GroupCommit<CompletedStep, boolean>;

  constructor(steps: StepStore) {
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

  /** The first completion of a step: true once written, false when the claim no longer owns the task. */
  stepCompleted(step: CompletedStep): Promise<boolean> {
    return this.group.submit(step);
  }
}
