import { Inject, Injectable } from '@nestjs/common';
import { LeaseHeartbeat } from '../../background/lease-heartbeat';
import { ResolvedDuraflowOptions } from '../../config/resolved-options';
import { WorkflowRegistry } from '../../discovery/workflow.registry';
import { RESOLVED_DURAFLOW_OPTIONS, UUID_PATTERN } from '../../domain/duraflow.constants';
import { AgentTask } from '../../domain/entities/agent-task.entity';
import { SignalLimitExceededError, TaskAlreadyFinishedError, TaskNotFoundError, TaskNotHeldError } from '../../domain/errors';
import { isTerminalStatus } from '../../domain/task-status';
import { SagaExecutor } from '../../execution/saga-executor';
import { TaskLeases } from '../../lease/task-leases';
import { RunObserver } from '../../observability/run-observer';
import { TaskTransitions } from '../../persistence/lifecycle/task-transitions';
import { TaskStore } from '../../persistence/task.store';
import { checkSignal } from '../../validation/signal';

export interface CancelOptions {
  /**
   * Also undo the task's completed steps (their compensations, newest first) before it ends
   * `cancelled`; a compensation that fails for good goes to the dead-letter queue. The call
   * resolves when the rollback is over. Default false: stop the task, undo nothing.
   */
  compensate?: boolean;
}

/** What `signal` resolves with. */
export interface SignalReceipt {
  signalId: string;
  taskId: string;
  name: string;
  /** The task was waiting for a signal of this name and was made runnable at once. */
  wokeTask: boolean;
}

/** A task id as the caller gave it, or TaskNotFoundError for one no task can have. */
function taskId(id: unknown): string {
  if (typeof id !== 'string' || !UUID_PATTERN.test(id)) throw new TaskNotFoundError(String(id));
  return id;
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
  ) {}

  async cancel(id: string, options: CancelOptions = {}): Promise<AgentTask> {
    taskId(id);
    if (options?.compensate) return this.cancelAndCompensate(id);
    const { task, previousStatus } = await this.transitions.cancel(id);
    if (!previousStatus) throw new TaskNotFoundError(id);
    if (!task) throw new TaskAlreadyFinishedError(id, previousStatus);
    // Children belong to their parent: the unfinished ones below it are cancelled too.
    await this.transitions.cancelDescendants([id], { includeRoots: false, compensate: false });
    return task;
  }

  async resume(id: string): Promise<AgentTask> {
    const resumed = await this.transitions.resume(taskId(id));
    if (resumed) return resumed;
    const task = await this.tasks.findTask(id);
    if (!task) throw new TaskNotFoundError(id);
    throw new TaskNotHeldError(id, task.status);
  }

  async signal(id: string, name: string, payload?: unknown): Promise<SignalReceipt> {
    const payloadJson = checkSignal(name, payload, this.options);
    const { maxKeptPerTask } = this.options.signals;
    const sent = await this.transitions.sendSignal(taskId(id), name, payloadJson ?? null, maxKeptPerTask);
    if (!sent.status) throw new TaskNotFoundError(id);
    if (sent.full && !isTerminalStatus(sent.status)) throw new SignalLimitExceededError(id, name, maxKeptPerTask);
    if (!sent.signalId) throw new TaskAlreadyFinishedError(id, sent.status, 'signalled');
    return { signalId: sent.signalId, taskId: id, name, wokeTask: sent.woke };
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
