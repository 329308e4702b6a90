import { TaskNotFoundError } from '../domain/errors';
import { TaskTransitions } from '../persistence/lifecycle/task-transitions';
import { TaskStore } from '../persistence/task.store';
import { checkedTaskId, TaskMoves } from '../services/workflows/task-moves';
import { CliDatabase } from './cli-database';
import { CliUsageError, NeedsApplicationError } from './cli.errors';
import { terminalText as shown } from './terminal-text';
import { jsonOf, operandsOf, TasksArguments } from './tasks-arguments';

/** What an action prints: `report` with --json, `lines` for people. */
export interface ActionOutput {
  report: unknown;
  lines: string[];
}

/** `tasks cancel|resume|signal|retry|fork`: the lifecycle's moves, with the errors WorkflowService gives for them. */
export async function runTaskAction(args: TasksArguments, { db, options }: CliDatabase): Promise<ActionOutput> {
  const tasks = new TaskStore(db);
  // The moves WorkflowService makes, with the module's default limits (the command has no app to read the app's from).
  const moves = new TaskMoves(options, new TaskTransitions(db), tasks);
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
      if (!(await tasks.findTask(id))) throw new TaskNotFoundError(id);
      throw forkNeedsApplication(id, args.fromStep);
    }
    default:
      throw new Error(`tasks ${args.subcommand} is not an action`);
  }
}

function compensationNeedsApplication(id: string): NeedsApplicationError {
  return new NeedsApplicationError(
    `tasks cancel --compensate runs the workflow's compensations, which only the app has: nothing was changed. ` +
      `Cancel it with compensation from the app (workflows.cancel('${id}', { compensate: true })), the engine ` +
      `(POST /tasks/${id}/cancel?compensate=true) or the dashboard's Cancel and compensate; or cancel it without --compensate.`,
  );
}

/**
 * A fork is a new run: TaskFactory makes it from the workflow's registration (the versions this
 * code has, the input's DTO, the flow-control key, the workflow's retries), which only the app has.
 */
function forkNeedsApplication(id: string, fromStep: string): NeedsApplicationError {
  const step = JSON.stringify(fromStep);
  return new NeedsApplicationError(
    `tasks fork makes a new run, which needs the workflow's code (its versions, input checks and flow-control key): nothing was ` +
      `written. Fork it from the app (workflows.fork('${id}', { fromStep: ${step} })), the engine (POST /tasks/${id}/fork ` +
      `with {"fromStep": ${step}}) or the dashboard's "Fork from here" on the step's row.`,
  );
}
