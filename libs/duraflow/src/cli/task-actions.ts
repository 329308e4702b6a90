import { AgentTask } from '../domain/entities/agent-task.entity';
import { TaskNotFoundError, UnknownStepError } from '../domain/errors';
import { forkOfRow } from '../execution/fork-of-row';
import { TaskTransitions } from '../persistence/lifecycle/task-transitions';
import { TaskStore } from '../persistence/task.store';
import { checkedTaskId, TaskMoves } from '../services/workflows/task-moves';
import { CliDatabase } from './cli-database';
import { CliUsageError, NeedsApplicationError } from './cli.errors';
import { terminalText as shown } from './terminal-text';
import { formatTaskList, toTaskListItem } from './task-views';
import { jsonOf, operandsOf, TasksArguments } from './tasks-arguments';

/** What an action prints: `report` with --json, `lines` for people. */
export interface ActionOutput {
  report: unknown;
  lines: string[];
}

/** `tasks cancel|resume|signal|retry|fork`: the lifecycle's moves, with the errors WorkflowService gives for them. */
export async function runTaskAction(args: TasksArguments, { db, options, coder }: CliDatabase): Promise<ActionOutput> {
  const tasks = new TaskStore(db, coder);
  // The moves WorkflowService makes, with the module's default limits (the command has no app to read the app's from).
  const transitions = new TaskTransitions(db, coder);
  const moves = new TaskMoves(options, transitions, tasks);
  switch (args.subcommand) {
    case 'cancel': {
      const id = checkedTaskId(operandsOf(args, ['id'])[0]);
      if (args.compensate) throw compensationNeedsApplication(id);
      const { task, previousStatus } = await moves.cancel(id);
      return {
        report: { task, previousStatus },
        lines: [`Cancelled ${shown(id)} (${shown(task.workflowName)}): it was ${shown(previousStatus)}; its unfinished children too`],
      };
    }
    case 'resume': {
      const id = checkedTaskId(operandsOf(args, ['id'])[0]);
      const resumed = await moves.resume(id);
      return { report: { task: resumed }, lines: [`Resumed ${shown(id)} (${shown(resumed.workflowName)}): the workers run it again`] };
    }
    case 'signal': {
      const [given, name] = operandsOf(args, ['id', 'name']);
      const id = checkedTaskId(given);
      const receipt = await moves.signal(id, name, jsonOf('--payload', args.payload));
      return {
        report: receipt,
        lines: [
          `Sent signal ${shown(name)} (${receipt.signalId}) to ${shown(id)}${receipt.wokeTask ? ': the task was waiting for it and runs again' : ''}`,
        ],
      };
    }
    case 'retry': {
      const id = checkedTaskId(operandsOf(args, ['id'])[0]);
      const task = await moves.retry(id);
      return { report: { task }, lines: [`Retried ${shown(id)} (${shown(task.workflowName)}): it runs again from where it stopped`] };
    }
    case 'fork': {
      const id = checkedTaskId(operandsOf(args, ['id'])[0]);
      if (!args.fromStep) throw new CliUsageError('tasks fork needs --from-step <key>. Run duraflow tasks --help.');
      if (args.input !== undefined || args.version !== undefined) throw forkNeedsApplication(id, args.fromStep);
      return forkFromRow(id, args.fromStep, tasks, transitions);
    }
    default:
      throw new Error(`tasks ${args.subcommand} is not an action`);
  }
}

/**
 * A fork with the original's input and version: the factory's fork of the row (nothing of the
 * workflow's code needed), then the fork's create move as `workflows.fork` makes it. An unknown
 * task or step writes nothing.
 */
async function forkFromRow(id: string, fromStep: string, tasks: TaskStore, transitions: TaskTransitions): Promise<ActionOutput> {
  const original = await tasks.findTask(id);
  if (!original || original.deletedAt) throw new TaskNotFoundError(id);
  // No trace to continue: the command runs outside any traced request.
  const outcome = await transitions.fork(forkOfRow(original, fromStep, null));
  if ('missing' in outcome) throw outcome.missing === 'task' ? new TaskNotFoundError(id) : new UnknownStepError(id, fromStep);
  const task: AgentTask = outcome.task;
  delete task.claimToken;
  const copied = outcome.copiedSteps;
  return {
    report: { task, copiedSteps: copied },
    lines: [
      `Forked ${shown(id)} (${shown(task.workflowName)}) from step ${shown(JSON.stringify(fromStep))}: new task ${shown(task.id)}, ` +
        `${copied} step${copied === 1 ? '' : 's'} copied as done, never run again; the workers run the rest`,
      '',
      ...formatTaskList({ items: [toTaskListItem(task)], nextCursor: null }),
    ],
  };
}

function compensationNeedsApplication(id: string): NeedsApplicationError {
  return new NeedsApplicationError(
    `tasks cancel --compensate runs the workflow's compensations, which only the app has: nothing was changed. ` +
      `Cancel it with compensation from the app (workflows.cancel('${id}', { compensate: true })), the engine ` +
      `(POST /tasks/${id}/cancel?compensate=true) or the dashboard's Cancel and compensate; or cancel it without --compensate.`,
  );
}

/**
 * A fork on another input or version is checked against the workflow's registration (the versions
 * this code has, the input's DTO, the flow-control key), which only the app has.
 */
function forkNeedsApplication(id: string, fromStep: string): NeedsApplicationError {
  const step = JSON.stringify(fromStep);
  return new NeedsApplicationError(
    `tasks fork with --input or --version makes a run on another input or version, which needs the workflow's code (its ` +
      `versions, input checks and flow-control key): nothing was written. Fork it from the app (workflows.fork('${id}', ` +
      `{ fromStep: ${step}, input, version })), the engine (POST /tasks/${id}/fork with {"fromStep": ${step}, "input": ..., ` +
      `"version": ...}) or the dashboard's "Fork from here" on the step's row; without --input and --version, tasks fork ` +
      `runs it on the original's input and version.`,
  );
}
