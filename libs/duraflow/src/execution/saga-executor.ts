import { Injectable } from '@nestjs/common';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { AgentTask, RollbackReason, TaskError } from '../domain/entities/agent-task.entity';
import { CompensationNotRegisteredError } from '../domain/errors';
import { TaskStatus } from '../domain/task-status';
import { TaskLease } from '../lease/task-lease';
import { deadLetterError } from '../persistence/dead-letter-error';
import { DeadLetterStore } from '../persistence/dead-letter.store';
import { CompensableStep, StepStore } from '../persistence/step.store';
import { TaskStore } from '../persistence/task.store';
import { isTransientDatabaseError } from '../persistence/transient-error';
import { describeError } from '../util/describe-error';
import { DuraflowLogger } from '../observability/duraflow-logger';
import { observeCompensation } from '../observability/run-observer';
import { ChildRollback } from './child-rollback';
import { runCompensation } from './compensation';

/** How a rollback ended, as far as this process knows. */
export type RollbackOutcome =
  TaskStatus.ROLLED_BACK | TaskStatus.PARTIAL_ROLLBACK | TaskStatus.FAILED | TaskStatus.CANCELLED | 'stopped' | 'unrecorded';

/** A write the rollback could not make: the database was unreachable. */
class Unrecorded extends Error {}

/**
 * The saga: undoes a task's completed steps in reverse completion order under the task's
 * claim. Each compensation gets its step's saved output; one that succeeds gets
 * `compensated_at`, one that fails for good goes to the dead-letter queue and the rest still
 * run. Every write is fenced on the claim, so a rollback interrupted by a crash is resumed by
 * whoever claims the task next, and a compensation that is recorded never runs again.
 */
@Injectable()
export class SagaExecutor {
  private readonly logger = new DuraflowLogger();

  constructor(
    private readonly registry: WorkflowRegistry,
    private readonly tasks: TaskStore,
    private readonly steps: StepStore,
    private readonly deadLetters: DeadLetterStore,
    private readonly children: ChildRollback,
  ) {}

  /**
   * Starts a rollback (writing `reason` and, for a failure, the task's error first) or, with
   * no `start`, resumes the one already marked on the task, and takes it to its final status.
   */
  async rollback(task: AgentTask, lease: TaskLease, reason: RollbackReason, start?: { error: TaskError | null }): Promise<RollbackOutcome> {
    try {
      if (
        start &&
        !(await recorded(
          lease.write(() => this.tasks.beginRollback(task.id, lease.claimToken, reason, start.error && JSON.stringify(start.error))),
        ))
      ) {
        return 'stopped';
      }
      const steps = await recorded(lease.retry(() => this.steps.listCompensableSteps(task.id)));
      for (const step of steps) {
        if (step.compensated || step.deadLettered) continue;
        if (lease.stoppedBecause) return 'stopped';
        if (!(await this.undo(task, lease, step))) return 'stopped';
      }
      if (lease.stoppedBecause) return 'stopped';
      const ended: { status: TaskStatus | null } = { status: null };
      const finished = await recorded(
        lease.writeOutcome(
          async () => (ended.status = await this.tasks.finishRollback(task.id, lease.claimToken, reason, steps.length > 0)) !== null,
        ),
      );
      const { status } = ended;
      if (!finished || !status) return 'stopped';
      if (status !== TaskStatus.CANCELLED) {
        const code = (start ? start.error : task.error)?.code ?? 'UNKNOWN';
        const deadLetters = status === TaskStatus.PARTIAL_ROLLBACK ? ': see its dead letters' : '';
        this.logger.warn(`Task ${task.id} (${task.workflowName}) ended ${status}: ${code}${deadLetters}`, {
          taskId: task.id,
          workflow: task.workflowName,
          code,
        });
      }
      return status as RollbackOutcome;
    } catch (error) {
      if (error instanceof Unrecorded) {
        this.logger.warn(`Rollback of task ${task.id} stopped: ${error.message}; it will be resumed after recovery`, {
          taskId: task.id,
          workflow: task.workflowName,
        });
        return 'unrecorded';
      }
      if (lease.stoppedBecause) return 'stopped';
      throw error;
    }
  }

  /** Runs one compensation and records its outcome. False when this claim lost the task. */
  private async undo(task: AgentTask, lease: TaskLease, step: CompensableStep): Promise<boolean> {
    const compensation = this.registry.resolveCompensation(task.workflowName, step.stepKey, step.compensationFn);
    let failure: { error: unknown; attempts: number } | undefined;
    if (ChildRollback.isChildStep(step.compensationFn)) {
      // A child's place in the LIFO order: the child is rolled back here (child-rollback.ts).
      const result = await recorded(this.children.rollBack(task, step.stepKey, lease));
      if (result === 'stopped') return false;
      if (result === 'dead-lettered')
        failure = { error: new Error(`the rollback of child step "${step.stepKey}" was partial`), attempts: 1 };
    } else if (!compensation) {
      failure = { error: new CompensationNotRegisteredError(step.compensationFn, step.stepKey, task.workflowName), attempts: 0 };
    } else {
      const result = await observeCompensation(
        lease,
        step.stepKey,
        () =>
          runCompensation({
            compensation,
            output: step.outputUndefined ? undefined : step.output,
            runId: task.id,
            workflowName: task.workflowName,
            stepKey: step.stepKey,
            signal: lease.signal,
            beforeAttempt: () => lease.confirmIfOld(),
          }).catch(() => undefined), // rejects only when the lease stopped
      );
      if (!result) return false;
      if (!result.ok) failure = result;
    }

    if (!failure) return recorded(lease.write(() => this.steps.markCompensated(task.id, lease.claimToken, step.id)));
    const error = deadLetterError(failure.error, { stepKey: step.stepKey, compensationFn: step.compensationFn, attempt: failure.attempts });
    this.logger.warn(
      `Compensation of step "${step.stepKey}" of task ${task.id} failed for good: ${error.message}; sent to the dead-letter queue`,
      { taskId: task.id, workflow: task.workflowName, stepKey: step.stepKey, code: error.code },
    );
    return recorded(lease.write(() => this.deadLetters.insertDeadLetter(task.id, lease.claimToken, step.id, JSON.stringify(error))));
  }
}

/** A statement of the rollback: only an outage makes it wait for recovery; a statement that is wrong is a bug to surface. */
async function recorded<T>(statement: Promise<T>): Promise<T> {
  try {
    return await statement;
  } catch (error) {
    if (!isTransientDatabaseError(error)) throw error;
    throw new Unrecorded(`the database could not be reached (${describeError(error).message})`);
  }
}
