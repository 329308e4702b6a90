import { Injectable, Logger } from '@nestjs/common';
import { AgentTask } from '../domain/entities/agent-task.entity';
import { NonDeterminismError } from '../domain/errors';
import { TaskLease } from '../lease/task-lease';
import { DuraflowDatabase } from '../persistence/duraflow-database';
import { holdTask } from '../persistence/sql/hold-task';
import { describeError } from '../util/describe-error';
import type { RunOutcome } from '../domain/run-outcome';
import type { RunSlot } from './task-executor';

/**
 * Holds a run the determinism guard stopped: a deploy bug, not a business failure, so no
 * rollback and no failed status. The task goes back to `pending` with `held_at` and its
 * NonDeterminismError (persistence/sql/hold-task.ts), fenced on the run's claim, and waits there
 * for `workflows.resume(id)` (or a cancel).
 */
@Injectable()
export class RunHold {
  private readonly logger = new Logger('Duraflow');

  constructor(private readonly db: DuraflowDatabase) {}

  async hold(task: AgentTask, lease: TaskLease, slot: RunSlot, error: NonDeterminismError): Promise<RunOutcome> {
    slot.release();
    try {
      const landed = await lease.writeOutcome(() => holdTask(this.db, task.id, lease.claimToken, JSON.stringify(error)));
      if (!landed) return 'stopped';
      this.logger.error(`Task ${task.id} (${task.workflowName}) is held: ${error.message}`);
      return 'held';
    } catch (dbError) {
      if (lease.stoppedBecause) return 'stopped';
      this.logger.warn(
        `Task ${task.id} diverged from its recorded path but its hold could not be recorded (${describeError(dbError).message}); ` +
          'it will be recovered and checked again.',
      );
      return 'unrecorded';
    }
  }
}
