import { Injectable, Logger } from '@nestjs/common';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { AgentTask } from '../domain/entities/agent-task.entity';
import { CompensationNotRegisteredError } from '../domain/errors';
import { TaskLease } from '../lease/task-lease';
import { deadLetterError } from '../persistence/dead-letter-error';
import { CHILD_COMPENSATION } from '../persistence/sql/start-child';
import { StepStore } from '../persistence/step.store';
import { WaitStore } from '../persistence/wait.store';
import { runCompensation } from './compensation';

/** How rolling a child back went: every step undone, some sent to the dead-letter queue, or the parent's claim was lost. */
export type ChildRollbackResult = 'undone' | 'dead-lettered' | 'stopped';

/**
 * A parent's rollback reaching the step that started a child (nested sagas): the child is
 * rolled back at that place in the parent's LIFO order.
 * - A child that completed: its own compensations run here, newest first, under the parent's
 *   claim (each recorded on the child's step, fenced on the parent's claim), its own children
 *   the same way, recursively; one that fails for good goes to the dead-letter queue on the
 *   child's step. The child keeps its status `completed` (terminal states never change).
 * - A child still pending or running: cancelled, and handed to the workers for its own
 *   `cancelled` rollback (sql/cancel-descendants.ts), its children with it.
 * - A child that ended otherwise (failed, rolled back, cancelled): its own saga ran already.
 */
@Injectable()
export class ChildRollback {
  private readonly logger = new Logger('Duraflow');

  constructor(
    private readonly registry: WorkflowRegistry,
    private readonly waits: WaitStore,
    private readonly steps: StepStore,
  ) {}

  /** Whether `compensationFn` names a child's rollback rather than a registered compensation. */
  static isChildStep(compensationFn: string): boolean {
    return compensationFn === CHILD_COMPENSATION;
  }

  /** Rolls back the child the step `stepKey` of `parent` started, under `lease` (the parent's rollback). */
  async rollBack(parent: AgentTask, stepKey: string, lease: TaskLease): Promise<ChildRollbackResult> {
    const child = await lease.retry(() => this.waits.findChild(parent.id, stepKey));
    if (!child) return 'undone';
    if (child.status === 'pending' || child.status === 'running') {
      await lease.retry(() => this.waits.cancelDescendants([child.id], { includeRoots: true, compensate: true }));
      return 'undone';
    }
    if (child.status !== 'completed') return 'undone';
    return this.undoCompleted(child, lease);
  }

  private async undoCompleted(child: AgentTask, lease: TaskLease): Promise<ChildRollbackResult> {
    let deadLettered = false;
    for (const step of await lease.retry(() => this.steps.listCompensableSteps(child.id))) {
      if (step.compensated) continue;
      if (step.deadLettered) {
        deadLettered = true;
        continue;
      }
      if (lease.stoppedBecause) return 'stopped';
      let failure: { error: unknown; attempts: number } | undefined;
      if (ChildRollback.isChildStep(step.compensationFn)) {
        const nested = await this.rollBack(child, step.stepKey, lease);
        if (nested === 'stopped') return 'stopped';
        if (nested === 'dead-lettered')
          failure = { error: new Error(`the rollback of child step "${step.stepKey}" was partial`), attempts: 1 };
      } else {
        const compensation = this.registry.resolveCompensation(child.workflowName, step.stepKey, step.compensationFn);
        if (!compensation) {
          failure = { error: new CompensationNotRegisteredError(step.compensationFn, step.stepKey, child.workflowName), attempts: 0 };
        } else {
          const result = await runCompensation({
            compensation,
            output: step.outputUndefined ? undefined : step.output,
            runId: child.id,
            workflowName: child.workflowName,
            stepKey: step.stepKey,
            signal: lease.signal,
          }).catch(() => undefined);
          if (!result) return 'stopped';
          if (!result.ok) failure = result;
        }
      }
      const { taskId, claimToken } = lease;
      if (!failure) {
        if (!(await lease.write(() => this.waits.markChildStepCompensated(taskId, claimToken, child.id, step.id)))) return 'stopped';
        continue;
      }
      deadLettered = true;
      const error = deadLetterError(failure.error, {
        stepKey: step.stepKey,
        compensationFn: step.compensationFn,
        attempt: failure.attempts,
      });
      this.logger.warn(
        `Compensation of step "${step.stepKey}" of child task ${child.id} failed for good: ${error.message}; sent to the dead-letter queue`,
      );
      const written = await lease.write(() => this.waits.deadLetterChildStep(taskId, claimToken, child.id, step.id, JSON.stringify(error)));
      if (!written) return 'stopped';
    }
    return deadLettered ? 'dead-lettered' : 'undone';
  }
}
