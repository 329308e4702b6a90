import { UUID_PATTERN } from '../domain/duraflow.constants';
import { codecFromEnv } from '../codec/codec-from-env';
import { viewable } from '../codec/decoded-rows';
import { AgentTask } from '../domain/entities/agent-task.entity';
import { TaskNotFoundError } from '../domain/errors';
import { decodeCursor, keysetPage, listLimit } from '../persistence/cursor';
import { DeadLetterStore } from '../persistence/dead-letter.store';
import { SignalStore } from '../persistence/signal.store';
import { readStepSummaries } from '../persistence/sql/read-step-summaries';
import { TaskStore } from '../persistence/task.store';
import { checkWorkflowFilter, createdRange } from '../validation/call-options';
import { parseTagPairs } from '../validation/tags';
import { CliDatabase, openCliDatabase } from './cli-database';
import { CliUsageError } from './cli.errors';
import { runTaskAction } from './task-actions';
import { formatTaskList, formatTaskShow, TaskListReport, TaskShowReport, toStepView, toTaskListItem } from './task-views';
import { operandsOf, TASKS_USAGE, TasksArguments, wholeNumberOf } from './tasks-arguments';

/** Signals and dead letters `tasks show` prints: the first ones, previews only. */
const SHOWN_ENTRIES = 50;
/** Characters of a step's input and output `tasks show` reads (it prints neither: keep it small). */
const STEP_PREVIEW_CHARS = 1;

/** `duraflow tasks <subcommand>`: reads through the library's stores, changes through its lifecycle moves. */
export async function tasksCommand(
  args: TasksArguments,
  url: string,
  print: (line: string) => void,
  env: NodeJS.ProcessEnv = process.env,
): Promise<void> {
  if (args.subcommand === 'help') {
    print(TASKS_USAGE);
    return;
  }
  checkFlags(args);
  const database = await openCliDatabase(url, codecFromEnv(env));
  try {
    const output = await runSubcommand(args, database);
    if (args.json) print(JSON.stringify(output.report, null, 2));
    else output.lines.forEach((line) => print(line));
  } finally {
    await database.close().catch(() => undefined);
  }
}

/** Which flags each subcommand takes: any other is a usage error, before the database is opened. */
const FLAGS_OF: Record<string, Array<keyof TasksArguments>> = {
  list: ['workflow', 'statuses', 'tags', 'version', 'held', 'createdAfter', 'createdBefore', 'limit', 'after'],
  show: [],
  cancel: ['compensate'],
  resume: [],
  signal: ['payload'],
  retry: [],
  fork: ['fromStep', 'input', 'version'],
};

const FLAG_NAMES: Partial<Record<keyof TasksArguments, string>> = {
  workflow: '--workflow',
  statuses: '--status',
  tags: '--tag',
  version: '--version',
  held: '--held',
  createdAfter: '--created-after',
  createdBefore: '--created-before',
  limit: '--limit',
  after: '--after',
  payload: '--payload',
  compensate: '--compensate',
  fromStep: '--from-step',
  input: '--input',
};

function checkFlags(args: TasksArguments): void {
  const allowed = FLAGS_OF[args.subcommand];
  for (const [key, flag] of Object.entries(FLAG_NAMES) as Array<[keyof TasksArguments, string]>) {
    const value = args[key];
    const given = Array.isArray(value) ? value.length > 0 : value !== undefined;
    if (given && !allowed.includes(key)) throw new CliUsageError(`tasks ${args.subcommand} takes no ${flag}. Run duraflow tasks --help.`);
  }
}

interface SubcommandOutput {
  report: unknown;
  lines: string[];
}

async function runSubcommand(args: TasksArguments, database: CliDatabase): Promise<SubcommandOutput> {
  if (args.subcommand === 'list') {
    const report = await listTasks(args, database);
    return { report, lines: formatTaskList(report) };
  }
  if (args.subcommand === 'show') {
    const [id] = operandsOf(args, ['id']);
    const report = await showTask(id, database);
    return { report, lines: formatTaskShow(report) };
  }
  return runTaskAction(args, database);
}

async function listTasks(args: TasksArguments, { db, options, coder }: CliDatabase): Promise<TaskListReport> {
  operandsOf(args, []);
  const limit = listLimit(wholeNumberOf('--limit', args.limit, 1));
  const page = await new TaskStore(db, coder).listTasks({
    status: args.statuses.length ? args.statuses : undefined,
    workflowName: checkWorkflowFilter(args.workflow),
    workflowVersion: wholeNumberOf('--version', args.version, 1),
    ...createdRange({ createdAfter: args.createdAfter, createdBefore: args.createdBefore }),
    held: args.held,
    tags: parseTagPairs(args.tags, (reason) => new CliUsageError(`--tag ${reason}`)),
    limit,
    maxBytes: options.maxListPageBytes,
    after: args.after ? decodeCursor(args.after) : undefined,
  });
  const { items, nextCursor } = keysetPage(page, (row) => row.task);
  return { items: items.map((task) => toTaskListItem(sealedErrorShown(viewable(task, ['error'])))), nextCursor };
}

async function showTask(id: string, { db, options, coder }: CliDatabase): Promise<TaskShowReport> {
  if (!UUID_PATTERN.test(id)) throw new TaskNotFoundError(id);
  const task = sealedErrorShown(viewable(await new TaskStore(db, coder).findTask(id)));
  if (!task) throw new TaskNotFoundError(id);
  delete task.claimToken;
  const maxBytes = options.maxListPageBytes;
  const [steps, signals, deadLetters] = await Promise.all([
    readStepSummaries(db, id, STEP_PREVIEW_CHARS, coder),
    new SignalStore(db, coder).listSignalPage(id, { afterId: '0', limit: SHOWN_ENTRIES, maxPayloadBytes: 0, maxBytes }),
    new DeadLetterStore(db, coder).listDeadLetters({ taskId: id, limit: SHOWN_ENTRIES, maxBytes }),
  ]);
  return {
    task,
    steps: steps.map(toStepView),
    signals: { items: signals.signals, more: signals.more },
    deadLetters: { items: deadLetters.rows.map((row) => viewable(row.deadLetter, ['error'])), more: deadLetters.more },
  };
}

/** An error sealed by a codec the command was not given (no DURAFLOW_CODEC_KEYS): its readable parts, and a message saying so. */
function sealedErrorShown<T extends AgentTask | null>(task: T): T {
  if (task?.error && typeof task.error.message !== 'string') {
    task.error = { ...task.error, message: '[encrypted: set DURAFLOW_CODEC_KEYS to read it]' };
  }
  return task;
}
