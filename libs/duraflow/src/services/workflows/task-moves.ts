import { Inject, Injectable } from '@nestjs/common';
import { ResolvedDuraflowOptions } from '../../config/resolved-options';
import { RESOLVED_DURAFLOW_OPTIONS, UUID_PATTERN } from '../../domain/duraflow.constants';
import { AgentTask } from '../../domain/entities/agent-task.entity';
import {
  SignalLimitExceededError,
  TaskAlreadyFinishedError,
  TaskNotFoundError,
  TaskNotHeldError,
  TaskNotRetryableError,
} from '../../domain/errors';
import { isTerminalStatus } from '../../domain/task-status';
import { TaskTransitions } from '../../persistence/lifecycle/task-transitions';
import { TaskStore } from '../../persistence/task.store';
import { checkSignal } from '../../validation/signal';

/** What `signal` resolves with. */
export interface SignalReceipt {
  signalId: string;
  taskId: string;
  name: string;
  /** The task was waiting for a signal of this name and was made runnable at once. */
  wokeTask: boolean;
}

/** What a cancel without compensation did: the task after it, and the status it had. */
export interface CancelMove {
  task: AgentTask;
  previousStatus: string;
}

/** A task id as the caller gave it, or TaskNotFoundError for one no task can have (nothing is asked of the database). */
export function checkedTaskId(id: unknown): string {
  if (typeof id !== 'string' || !UUID_PATTERN.test(id)) throw new TaskNotFoundError(String(id));
  return id;
}

/**
 * The operator's moves on one task that need no workflow code — cancel without compensation,
 * resume a held task, signal, retry — each the lifecycle's move followed by the typed error its
 * outcome calls for. WorkflowService (through TaskControl and TaskOperations) and the `duraflow
 * tasks` command both go through here, so a move answers the same way wherever it is asked.
 */
@Injectable()
export class TaskMoves {
  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS)
    private readonly options: Pick<ResolvedDuraflowOptions, 'signals' | 'maxInputBytes' | 'maxJsonDepth'>,
    private readonly transitions: TaskTransitions,
    private readonly tasks: TaskStore,
  ) {}

  /** Stops the task, undoing nothing; its unfinished children (which belong to it) are cancelled too. */
  async cancel(id: string): Promise<CancelMove> {
    const { task, previousStatus } = await this.transitions.cancel(checkedTaskId(id));
    if (!previousStatus) throw new TaskNotFoundError(id);
    if (!task) throw new TaskAlreadyFinishedError(id, previousStatus);
    await this.transitions.cancelDescendants([id], { includeRoots: false, compensate: false });
    return { task, previousStatus };
  }

  async resume(id: string): Promise<AgentTask> {
    const resumed = await this.transitions.resume(checkedTaskId(id));
    if (resumed) return resumed;
    const task = await this.tasks.findTask(id);
    if (!task) throw new TaskNotFoundError(id);
    throw new TaskNotHeldError(id, task.status);
  }

  async signal(id: string, name: string, payload?: unknown): Promise<SignalReceipt> {
    const payloadJson = checkSignal(name, payload, this.options);
    const { maxKeptPerTask } = this.options.signals;
    const sent = await this.transitions.sendSignal(checkedTaskId(id), name, payloadJson ?? null, maxKeptPerTask);
    if (!sent.status) throw new TaskNotFoundError(id);
    if (sent.full && !isTerminalStatus(sent.status)) throw new SignalLimitExceededError(id, name, maxKeptPerTask);
    if (!sent.signalId) throw new TaskAlreadyFinishedError(id, sent.status, 'signalled');
    return { signalId: sent.signalId, taskId: id, name, wokeTask: sent.woke };
  }

  /** One conditional move (its NOTIFY wakes the workers), then what it found. */
  async retry(id: string): Promise<AgentTask> {
    const changed = await this.transitions.retry([checkedTaskId(id)]);
    const task = await this.tasks.findTask(id);
    if (!task) throw new TaskNotFoundError(id);
    if (!changed.length) throw new TaskNotRetryableError(id, task.status);
    return task;
  }
}
