import { Injectable } from '@nestjs/common';
import { AgentTask } from '../../domain/entities/agent-task.entity';
import { TaskNotFoundError, UnknownStepError } from '../../domain/errors';
import { TaskFactory } from '../../execution/task-factory';
import { TaskTransitions } from '../../persistence/lifecycle/task-transitions';
import { TaskStore } from '../../persistence/task.store';
import { checkedTaskId, TaskMoves } from './task-moves';

/** What `workflows.fork` takes. */
export interface ForkOptions {
  /** The key of the original's step to run anew from: the steps it recorded before this one are copied, never run. */
  fromStep: string;
  /** The fork's input, checked as a submit's; default the original's. */
  input?: unknown;
  /** The workflow version the fork runs on (one this process registers); default the original's. */
  version?: number;
}

/** What `workflows.fork` resolves with: the new task (`id` its id). */
export type ForkResult = AgentTask & {
  /** How many of the original's recorded steps (steps, sleeps, signals, children, patch markers) were copied as done. */
  copiedSteps: number;
};

/** WorkflowService's operator moves on a finished run: retry it from where it stopped, fork it from a step. */
@Injectable()
export class TaskOperations {
  constructor(
    private readonly factory: TaskFactory,
    private readonly transitions: TaskTransitions,
    private readonly tasks: TaskStore,
    private readonly moves: TaskMoves,
  ) {}

  retry(id: string): Promise<AgentTask> {
    return this.moves.retry(id);
  }

  async fork(id: string, options: ForkOptions): Promise<ForkResult> {
    const original = await this.tasks.findTask(checkedTaskId(id));
    if (!original || original.deletedAt) throw new TaskNotFoundError(id);
    const fromStep: unknown = options?.fromStep;
    if (typeof fromStep !== 'string' || !fromStep) throw new UnknownStepError(id, String(fromStep));
    const input = options.input === undefined ? original.input : options.input;
    const version = options.version ?? original.workflowVersion ?? undefined;
    const origin = { kind: 'fork' as const, taskId: id, fromStep };
    const prepared = await this.factory.prepare(
      original.workflowName,
      input,
      // A fork keeps the original's tags.
      { version, priority: original.priority ?? 0, maxRetries: original.maxRetries ?? undefined, tags: original.tags ?? {} },
      origin,
    );
    const outcome = await this.factory.fork({ ...prepared, forkedFrom: { taskId: id, fromStep } });
    if ('missing' in outcome) throw outcome.missing === 'task' ? new TaskNotFoundError(id) : new UnknownStepError(id, fromStep);
    return Object.assign(outcome.task, { copiedSteps: outcome.copiedSteps });
  }
}
