import { Inject, Injectable } from '@nestjs/common';
import { LeaseHeartbeat } from '../../background/lease-heartbeat';
import { ResolvedDuraflowOptions } from '../../config/resolved-options';
import { WorkflowRegistry } from '../../discovery/workflow.registry';
import { RESOLVED_DURAFLOW_OPTIONS } from '../../domain/duraflow.constants';
import { AgentTask } from '../../domain/entities/agent-task.entity';
import { TaskAlreadyFinishedError, TaskNotFoundError } from '../../domain/errors';
import { SagaExecutor } from '../../execution/saga-executor';
import { TaskLeases } from '../../lease/task-leases';
import { RunObserver } from '../../observability/run-observer';
import { TaskTransitions } from '../../persistence/lifecycle/task-transitions';
import { TaskStore } from '../../persistence/task.store';
import { checkedTaskId, SignalReceipt, TaskMoves } from './task-moves';

export type { SignalReceipt } from './task-moves';

export interface CancelOptions {
  /**
   * Also undo the task's completed steps (their compensations, newest first) before it ends
   * `cancelled`; a compensation that fails for good goes to the dead-letter queue. The call
   * resolves when the rollback is over. Default false: stop the task, undo nothing.
   */
  compensate?: boolean;
}

/** WorkflowService's actions on a task: cancel (with or without compensation), resume a held task, signal. */
@Injectable()
export class TaskControl {
  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly registry: WorkflowRegistry,
    private readonly transitions: TaskTransitions,
    private readonly tasks: TaskStore,
    private readonly saga: SagaExecutor,
    private readonly leases: TaskLeases,
    private readonly heartbeat: LeaseHeartbeat,
    private readonly observer: RunObserver,
    private readonly moves: TaskMoves,
  ) {}

  async cancel(id: string, options: CancelOptions = {}): Promise<AgentTask> {
    checkedTaskId(id);
    if (options?.compensate) return this.cancelAndCompensate(id);
    return (await this.moves.cancel(id)).task;
  }

  resume(id: string): Promise<AgentTask> {
    return this.moves.resume(id);
  }

  signal(id: string, name: string, payload?: unknown): Promise<SignalReceipt> {
    return this.moves.signal(id, name, payload);
  }

  /**
   * The task taken over for a `cancelled` rollback under a claim of this process (heartbeated,
   * so a crash here leaves a rollback that a worker resumes), its steps undone here, newest first.
   */
  private async cancelAndCompensate(id: string): Promise<AgentTask> {
    const current = await this.tasks.findTask(id);
    if (!current) throw new TaskNotFoundError(id);
    // Its compensations run in this process: one that does not register the workflow would send
    // every step to the dead-letter queue. UnknownWorkflowError, and nothing written.
    this.registry.get(current.workflowName);
    const { task, previousStatus, claimToken } = await this.transitions.takeOverForCancelRollback(id, this.options.workerId);
    if (!previousStatus) throw new TaskNotFoundError(id);
    if (!task) throw new TaskAlreadyFinishedError(id, previousStatus);
    if (claimToken) await this.rollBackTakenOver(task, claimToken);
    // The children the rollback did not reach (still running, waited for) are cancelled and undone too.
    await this.transitions.cancelDescendants([id], { includeRoots: false, compensate: true });
    return claimToken ? ((await this.tasks.findTask(id)) ?? task) : task;
  }

  /**
   * A task a cancel took over (one, or a batch of cancelMany) rolled back here under that claim,
   * heartbeated, so a crash leaves a rollback that a worker resumes: its steps undone, newest
   * first, and the task ended `cancelled`.
   */
  async rollBackTakenOver(task: AgentTask, claimToken: string): Promise<void> {
    const lease = this.leases.open(task.id, claimToken);
    this.heartbeat.hold(lease);
    try {
      await this.observer.observe({ task, claimToken }, lease, () => this.saga.rollback(task, lease, 'cancelled'), true);
    } finally {
      this.heartbeat.release(lease);
    }
  }
}
