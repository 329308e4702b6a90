import { Injectable } from '@nestjs/common';
import { AgentTask, TaskError } from '../domain/entities/agent-task.entity';
import { NonDeterminismError } from '../domain/errors';
import { RunOutcome } from '../domain/run-outcome';
import { TaskLease } from '../lease/task-lease';
import { DuraflowLogger } from '../observability/duraflow-logger';
import { noteRunFailure } from '../observability/run-observer';
import { TaskTransitions } from '../persistence/lifecycle/task-transitions';
import { describeError } from '../util/describe-error';
import { storableJson } from '../validation/storable-text';
import { CompletionBatcher } from './completion-batcher';
import { SagaExecutor } from './saga-executor';

/** The slot a run holds in its worker while its code runs. */
export interface RunSlot {
  /** The run's code is over and only its outcome is left to write: the worker may start its next task meanwhile. */
  release(): void;
}

/**
 * A finished run's outcome, written as its lifecycle move through its lease (fenced on the
 * claim): complete, fail (or the saga, when it has steps to undo), or hold (the determinism guard
 * stopped it: a deploy bug, not a business failure, so no rollback and no failed status; it
 * waits for `workflows.resume(id)` or a cancel). Each gives the run's slot back before its write,
 * so the worker may start its next task while it commits. A write that could not reach the
 * database leaves the task to recovery (`unrecorded`); one the claim no longer owns, `stopped`.
 */
@Injectable()
export class RunOutcomes {
  private readonly logger = new DuraflowLogger();

  constructor(
    private readonly transitions: TaskTransitions,
    private readonly completions: CompletionBatcher,
    private readonly saga: SagaExecutor,
  ) {}

  complete(task: AgentTask, lease: TaskLease, slot: RunSlot, outputJson: string | null): Promise<RunOutcome> {
    return this.record(task, lease, slot, 'completed', 'finished but its completion', () =>
      this.completions.complete(task.id, lease.claimToken, outputJson),
    );
  }

  /** The run failed for good: undo its completed steps if it has any to undo, else end `failed`. */
  async fail(task: AgentTask, lease: TaskLease, slot: RunSlot, compensable: boolean, error: TaskError): Promise<RunOutcome> {
    noteRunFailure(lease, error);
    if (compensable) return this.saga.rollback(task, lease, 'failed', { error });
    const outcome = await this.record(task, lease, slot, 'failed', 'failed but the failure', () =>
      this.transitions.fail(task.id, lease.claimToken, storableJson(JSON.stringify(error))),
    );
    if (outcome === 'failed') {
      const fields = { taskId: task.id, workflow: task.workflowName, stepKey: error.stepKey, code: error.code };
      this.logger.warn(`Task ${task.id} (${task.workflowName}) ended failed: ${error.code}`, fields);
    }
    return outcome;
  }

  async hold(task: AgentTask, lease: TaskLease, slot: RunSlot, error: NonDeterminismError): Promise<RunOutcome> {
    const outcome = await this.record(task, lease, slot, 'held', 'diverged from its recorded path but its hold', () =>
      this.transitions.hold(task.id, lease.claimToken, storableJson(JSON.stringify(error))),
    );
    if (outcome === 'held')
      this.logger.error(`Task ${task.id} (${task.workflowName}) is held: ${error.message}`, {
        taskId: task.id,
        workflow: task.workflowName,
        code: error.code,
      });
    return outcome;
  }

  private async record(
    task: AgentTask,
    lease: TaskLease,
    slot: RunSlot,
    outcome: RunOutcome,
    what: string,
    write: () => Promise<boolean>,
  ): Promise<RunOutcome> {
    slot.release(); // the worker may claim the next task while this commits
    try {
      return (await lease.writeOutcome(write)) ? outcome : 'stopped';
    } catch (error) {
      if (lease.stoppedBecause) return 'stopped';
      this.logger.warn(`Task ${task.id} ${what} could not be recorded (${describeError(error).message}); it will be recovered.`, {
        taskId: task.id,
        workflow: task.workflowName,
      });
      return 'unrecorded';
    }
  }
}
