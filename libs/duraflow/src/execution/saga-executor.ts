import { Inject, Injectable } from '@nestjs/common';
import { DURAFLOW_CLOCK, DuraflowClock } from '../domain/engine-clock';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { AgentTask, RollbackReason, TaskError } from '../domain/entities/agent-task.entity';
import { TaskStatus } from '../domain/task-status';
import { TaskLease } from '../lease/task-lease';
import { DuraflowLogger } from '../observability/duraflow-logger';
import { RunObserver } from '../observability/run-observer';
import { deadLetterError } from '../persistence/dead-letter-error';
import { DeadLetterStore } from '../persistence/dead-letter.store';
import { TaskTransitions } from '../persistence/lifecycle/task-transitions';
import { StepStore } from '../persistence/step.store';
import { TaskStore } from '../persistence/task.store';
import { isTransientDatabaseError } from '../persistence/transient-error';
import { describeError } from '../util/describe-error';
import { storableJson } from '../validation/storable-text';
import { StepToUndo, UndoResult, undoStep } from './undo-step';

/** How a rollback ended, as far as this process knows. */
export type RollbackOutcome =
  TaskStatus.ROLLED_BACK | TaskStatus.PARTIAL_ROLLBACK | TaskStatus.FAILED | TaskStatus.CANCELLED | 'stopped' | 'unrecorded';

/** How undoing one task's steps went: every step undone, some in the dead-letter queue, or the claim was lost. */
type StepsUndone = 'undone' | 'dead-lettered' | 'stopped';

/** The task whose steps are undone. */
type UndoTarget = Pick<AgentTask, 'id' | 'workflowName'>;

/**
 * The saga: undoes a task's completed steps in reverse completion order under the task's claim.
 * Each step goes through `undoStep` (the one undo, confirmed and observed); one that succeeds gets
 * `compensated_at`, one that fails for good goes to the dead-letter queue and the rest still
 * run. Every write is fenced on the claim, so a rollback interrupted by a crash is resumed by
 * whoever claims the task next, and a compensation that is recorded never runs again.
 *
 * A child's step is undone at its place in the LIFO order: a child that completed has its own
 * steps undone here, under the parent's claim, recursively; an unfinished one is handed over for
 * its own `cancelled` rollback; one that ended otherwise ran its own saga already.
 */
@Injectable()
export class SagaExecutor {
  private readonly logger = new DuraflowLogger();

  constructor(
    private readonly registry: WorkflowRegistry,
    private readonly transitions: TaskTransitions,
    private readonly tasks: TaskStore,
    private readonly steps: StepStore,
    private readonly deadLetters: DeadLetterStore,
    private readonly observer: RunObserver,
    @Inject(DURAFLOW_CLOCK) private readonly clock: DuraflowClock,
  ) {}

  /**
   * Starts a rollback (writing `reason` and, for a failure, the task's error first) or, with
   * no `start`, resumes the one already marked on the task, and takes it to its final status.
   */
  async rollback(task: AgentTask, lease: TaskLease, reason: RollbackReason, start?: { error: TaskError | null }): Promise<RollbackOutcome> {
    try {
      const errorJson = start?.error ? storableJson(JSON.stringify(start.error)) : null;
      if (start && !(await lease.write(() => this.transitions.beginRollback(task.id, lease.claimToken, reason, errorJson))))
        return 'stopped';
      const { undone, found } = await this.undoSteps(task, lease);
      if (undone === 'stopped' || lease.stoppedBecause) return 'stopped';
      const ended: { status: TaskStatus | null } = { status: null };
      const finish = async () => (ended.status = await this.transitions.finishRollback(task.id, lease.claimToken, reason, found)) !== null;
      if (!(await lease.writeOutcome(finish)) || !ended.status) return 'stopped';
      if (ended.status !== TaskStatus.CANCELLED) {
        const code = (start ? start.error : task.error)?.code ?? 'UNKNOWN';
        const see = ended.status === TaskStatus.PARTIAL_ROLLBACK ? ': see its dead letters' : '';
        this.logger.warn(`Task ${task.id} (${task.workflowName}) ended ${ended.status}: ${code}${see}`, {
          taskId: task.id,
          workflow: task.workflowName,
          code,
        });
      }
      return ended.status as RollbackOutcome;
    } catch (error) {
      if (lease.stoppedBecause) return 'stopped';
      if (!isTransientDatabaseError(error)) throw error; // a statement that is wrong is a bug to surface
      const message = `Rollback of task ${task.id} stopped: the database could not be reached (${describeError(error).message}); it will be resumed after recovery`;
      this.logger.warn(message, { taskId: task.id, workflow: task.workflowName });
      return 'unrecorded';
    }
  }

  /** Undoes the steps of `target` left to undo, newest first, under `lease` (the target's own rollback, or its parent's). */
  private async undoSteps(target: UndoTarget, lease: TaskLease): Promise<{ undone: StepsUndone; found: boolean }> {
    const steps = await lease.retry(() => this.steps.listCompensableSteps(target.id));
    let deadLettered = false;
    for (const step of steps) {
      if (step.compensated) continue;
      deadLettered ||= step.deadLettered;
      if (step.deadLettered) continue;
      if (lease.stoppedBecause) return { undone: 'stopped', found: true };
      const undo = { ...step, taskId: target.id, workflowName: target.workflowName };
      const result = await undoStep(undo, {
        by: lease,
        lease,
        child: (childStep) => this.undoChild(childStep, lease),
        registry: this.registry,
        observer: this.observer,
        clock: this.clock,
      });
      if (!result || !(await this.recordUndo(undo, step.id, result, lease))) return { undone: 'stopped', found: true };
      deadLettered ||= !result.ok;
    }
    return { undone: deadLettered ? 'dead-lettered' : 'undone', found: steps.length > 0 };
  }

  /** The outcome of one undo, fenced on `lease`: the step compensated, or its dead letter. False when the claim is lost. */
  private recordUndo(step: StepToUndo, stepId: string, result: NonNullable<UndoResult>, lease: TaskLease): Promise<boolean> {
    const fence = { taskId: lease.taskId, claimToken: lease.claimToken };
    if (result.ok) return lease.write(() => this.steps.markCompensated(step.taskId, stepId, fence));
    const error = deadLetterError(result.error, { stepKey: step.stepKey, compensationFn: step.compensationFn, attempt: result.attempts });
    const of = step.taskId === lease.taskId ? 'task' : 'child task';
    this.logger.warn(
      `Compensation of step "${step.stepKey}" of ${of} ${step.taskId} failed for good: ${error.message}; sent to the dead-letter queue`,
      { taskId: step.taskId, workflow: step.workflowName, stepKey: step.stepKey, code: error.code },
    );
    return lease.write(() => this.deadLetters.insertDeadLetter(step.taskId, stepId, storableJson(JSON.stringify(error)), fence));
  }

  /**
   * A child's step in its parent's rollback. An unfinished child is handed over for its own
   * rollback by the cancel, which locks the child's row and judges its status under the lock; a
   * child that finished meanwhile is not moved, so it is read again after that lock (its status
   * is final then) and, when it completed, its own steps are undone here.
   */
  private async undoChild(step: StepToUndo, lease: TaskLease): Promise<UndoResult> {
    const child = await lease.retry(() => this.tasks.findChild(step.taskId, step.stepKey));
    if (!child) return { ok: true, attempts: 1 };
    const moved = await lease.retry(() => this.transitions.cancelDescendants([child.id], { includeRoots: true, compensate: true }));
    const finished = moved.includes(child.id) ? null : await lease.retry(() => this.tasks.findTask(child.id));
    if (finished?.status !== TaskStatus.COMPLETED) return { ok: true, attempts: 1 };
    const { undone } = await this.undoSteps(finished, lease);
    if (undone === 'stopped') return undefined;
    if (undone === 'undone') return { ok: true, attempts: 1 };
    return { ok: false, error: new Error(`the rollback of child step "${step.stepKey}" was partial`), attempts: 1 };
  }
}
