import { UUID_PATTERN } from '../domain/duraflow.constants';
import { AgentTask } from '../domain/entities/agent-task.entity';
import {
  SignalLimitExceededError,
  TaskAlreadyFinishedError,
  TaskNotFoundError,
  TaskNotHeldError,
  TaskNotRetryableError,
} from '../domain/errors';
import { isTerminalStatus } from '../domain/task-status';
import { TaskTransitions } from '../persistence/lifecycle/task-transitions';
import { TaskStore } from '../persistence/task.store';
import { checkSignal } from '../validation/signal';
import { CliDatabase } from './cli-database';
import { CliUsageError, NeedsApplicationError } from './cli.errors';
import { terminalText as shown } from './terminal-text';
import { jsonOf, operandsOf, TasksArguments } from './tasks-arguments';

/** What an action prints: `report` with --json, `lines` for people. */
export interface ActionOutput {
  report: unknown;
  lines: string[];
}

/** A task id as given, or TaskNotFoundError for one no task can have (nothing is asked of the database). */
function taskIdOf(id: string): string {
  if (!UUID_PATTERN.test(id)) throw new TaskNotFoundError(id);
  return id;
}

/** `tasks cancel|resume|signal|retry|fork`: the lifecycle's moves, with the errors WorkflowService gives for them. */
export async function runTaskAction(args: TasksArguments, { db, options }: CliDatabase): Promise<ActionOutput> {
  const transitions = new TaskTransitions(db);
  const tasks = new TaskStore(db);
  switch (args.subcommand) {
    case 'cancel': {
      const id = taskIdOf(operandsOf(args, ['id'])[0]);
      if (args.compensate) throw compensationNeedsApplication(id);
      const { task, previousStatus } = await cancel(transitions, id);
      return {
        report: { task, previousStatus },
        lines: [`Cancelled ${shown(id)} (${shown(task.workflowName)}): it was ${shown(previousStatus)}; its unfinished children too`],
      };
    }
    case 'resume': {
      const id = taskIdOf(operandsOf(args, ['id'])[0]);
      const resumed = await transitions.resume(id);
      if (!resumed) {
        const task = await tasks.findTask(id);
        if (!task) throw new TaskNotFoundError(id);
        throw new TaskNotHeldError(id, task.status);
      }
      return { report: { task: resumed }, lines: [`Resumed ${shown(id)} (${shown(resumed.workflowName)}): the workers run it again`] };
    }
    case 'signal': {
      const [given, name] = operandsOf(args, ['id', 'name']);
      const id = taskIdOf(given);
      // As TaskControl.signal, with the module's default limits (the command has no app to read the app's from).
      const payloadJson = checkSignal(name, jsonOf('--payload', args.payload), options);
      const { maxKeptPerTask } = options.signals;
      const sent = await transitions.sendSignal(id, name, payloadJson ?? null, maxKeptPerTask);
      if (!sent.status) throw new TaskNotFoundError(id);
      if (sent.full && !isTerminalStatus(sent.status)) throw new SignalLimitExceededError(id, name, maxKeptPerTask);
      if (!sent.signalId) throw new TaskAlreadyFinishedError(id, sent.status, 'signalled');
      const receipt = { signalId: sent.signalId, taskId: id, name, wokeTask: sent.woke };
      return {
        report: receipt,
        lines: [
          `Sent signal ${shown(name)} (${sent.signalId}) to ${shown(id)}${sent.woke ? ': the task was waiting for it and runs again' : ''}`,
        ],
      };
    }
    case 'retry': {
      const id = taskIdOf(operandsOf(args, ['id'])[0]);
      // As TaskOperations.retry: one conditional move (its NOTIFY wakes the workers), then what it found.
      const changed = await transitions.retry([id]);
      const task = await tasks.findTask(id);
      if (!task) throw new TaskNotFoundError(id);
      if (!changed.length) throw new TaskNotRetryableError(id, task.status);
      return { report: { task }, lines: [`Retried ${shown(id)} (${shown(task.workflowName)}): it runs again from where it stopped`] };
    }
    case 'fork': {
      const id = taskIdOf(operandsOf(args, ['id'])[0]);
      if (!args.fromStep) throw new CliUsageError('tasks fork needs --from-step <key>. Run duraflow tasks --help.');
      if (!(await tasks.findTask(id))) throw new TaskNotFoundError(id);
      throw forkNeedsApplication(id, args.fromStep);
    }
    default:
      throw new Error(`tasks ${args.subcommand} is not an action`);
  }
}

/** As TaskControl.cancel without compensation: the cancel move, then the task's unfinished children. */
async function cancel(transitions: TaskTransitions, id: string): Promise<{ task: AgentTask; previousStatus: string }> {
  const { task, previousStatus } = await transitions.cancel(id);
  if (!previousStatus) throw new TaskNotFoundError(id);
  if (!task) throw new TaskAlreadyFinishedError(id, previousStatus);
  await transitions.cancelDescendants([id], { includeRoots: false, compensate: false });
  return { task, previousStatus };
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
