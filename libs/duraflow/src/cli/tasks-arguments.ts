import { TaskStatus } from '../domain/task-status';
import { CliUsageError } from './cli.errors';

export const TASKS_USAGE = `Usage: duraflow tasks <subcommand> [options]

Subcommands:
  list                        Tasks, newest first (filters below), a page at a time
  show <id>                   The task, its steps (status, attempts, duration), its signals
                              (previews) and its dead letters
  cancel <id>                 Stop a pending or running task (and its unfinished children),
                              undoing nothing; --compensate needs the app (the message says how)
  resume <id>                 Run a task the determinism guard holds again, on the code deployed now
  signal <id> <name>          Send signal <name> to the task, with --payload <json>
  retry <id>                  Run a failed task (or a cancelled one not compensated) again from
                              where it stopped: its completed steps are kept, a worker takes it at once
  fork <id> --from-step <key> A new task on the original's input and version: the steps recorded
                              before <key> are copied as done (never run again), <key> and what
                              follows run anew; --input and --version need the app (the message says how)

Options:
  --url <postgres-url>        The database (default: DATABASE_URL)
  --json                      Print one JSON document on stdout
  --workflow <name>           list: only this workflow
  --status <status>           list: only these statuses (repeat it, or a comma list):
                              ${Object.values(TaskStatus).join(', ')}
  --version <n>               list: only this workflow version; fork: another version (refused
                              here: needs the app)
  --held                      list: only the tasks the determinism guard holds
  --tag <key:value>           list: only the tasks holding this tag (repeat it: every one must match)
  --created-after <iso-time>  list: created at or after
  --created-before <iso-time> list: created before
  --limit <n>                 list: at most n tasks, 1..1000 (default 50)
  --after <cursor>            list: the page after the one whose nextCursor this is
  --payload <json>            signal: the payload, as JSON text
  --compensate                cancel: also undo the completed steps (refused here: needs the app)
  --from-step <key>           fork: the step to run anew from (a key tasks show lists)
  --input <json>              fork: another input (refused here: needs the app's input checks)

Exit codes: 0 done; 1 refused or not found (the error's code is printed); 2 wrong command line;
3 the database cannot be reached`;

export const TASK_SUBCOMMANDS = ['list', 'show', 'cancel', 'resume', 'signal', 'retry', 'fork'] as const;

export type TaskSubcommand = (typeof TASK_SUBCOMMANDS)[number];

export interface TasksArguments {
  subcommand: TaskSubcommand | 'help';
  /** The positional arguments after the subcommand: the task id, a signal's name. */
  operands: string[];
  url?: string;
  json: boolean;
  workflow?: string;
  statuses: string[];
  /** `--tag key:value`, each as given. */
  tags: string[];
  version?: string;
  held?: boolean;
  createdAfter?: string;
  createdBefore?: string;
  limit?: string;
  after?: string;
  payload?: string;
  compensate?: boolean;
  fromStep?: string;
  input?: string;
}

const VALUE_OPTIONS = {
  '--url': 'url',
  '--workflow': 'workflow',
  '--version': 'version',
  '--created-after': 'createdAfter',
  '--created-before': 'createdBefore',
  '--limit': 'limit',
  '--after': 'after',
  '--payload': 'payload',
  '--from-step': 'fromStep',
  '--input': 'input',
} as const;

const FLAGS = { '--json': 'json', '--held': 'held', '--compensate': 'compensate' } as const;

/** `argv` after `tasks`: `['show', '<id>', '--json']`. A value may start with `--` only in the `--flag=value` form. */
export function parseTasksArguments(argv: string[]): TasksArguments {
  const parsed: TasksArguments = { subcommand: 'help', operands: [], json: false, statuses: [], tags: [] };
  const positional: string[] = [];
  for (let index = 0; index < argv.length; index++) {
    const argument = argv[index];
    const at = argument.startsWith('--') ? argument.indexOf('=') : -1;
    const [flag, inlineValue] = at > 0 ? [argument.slice(0, at), argument.slice(at + 1)] : [argument, undefined];
    if (flag === '-h' || flag === '--help') return { ...parsed, subcommand: 'help' };
    if (flag in FLAGS && inlineValue === undefined) {
      parsed[FLAGS[flag as keyof typeof FLAGS]] = true;
    } else if (flag === '--status' || flag === '--tag' || flag in VALUE_OPTIONS) {
      const value = inlineValue ?? argv[++index];
      if (value === undefined || value === '' || (inlineValue === undefined && value.startsWith('--'))) {
        throw new CliUsageError(`${flag} needs a value. Run duraflow tasks --help.`);
      }
      if (flag === '--status') parsed.statuses.push(...statusesOf(value));
      else if (flag === '--tag') parsed.tags.push(value);
      else parsed[VALUE_OPTIONS[flag as keyof typeof VALUE_OPTIONS]] = value;
    } else if (flag.startsWith('-') && flag !== '-') {
      throw new CliUsageError(`Unknown option ${flag}. Run duraflow tasks --help.`);
    } else {
      positional.push(argument);
    }
  }
  const [subcommand, ...operands] = positional;
  if (subcommand === undefined) return parsed;
  if (!(TASK_SUBCOMMANDS as readonly string[]).includes(subcommand)) {
    throw new CliUsageError(`Unknown subcommand "tasks ${subcommand}": use ${TASK_SUBCOMMANDS.join(', ')}. Run duraflow tasks --help.`);
  }
  return { ...parsed, subcommand: subcommand as TaskSubcommand, operands };
}

function statusesOf(value: string): string[] {
  const statuses = value
    .split(',')
    .map((status) => status.trim())
    .filter(Boolean);
  const known = Object.values(TaskStatus) as string[];
  const unknown = statuses.find((status) => !known.includes(status));
  if (unknown !== undefined || !statuses.length) {
    throw new CliUsageError(`--status "${unknown ?? value}" is not a status: use ${known.join(', ')}.`);
  }
  return statuses;
}

/** The operands a subcommand takes, checked: `names` says what each is, for the message. */
export function operandsOf(args: TasksArguments, names: string[]): string[] {
  if (args.operands.length !== names.length) {
    const usage = names.map((name) => `<${name}>`).join(' ');
    throw new CliUsageError(`tasks ${args.subcommand} takes ${usage}, got ${args.operands.length} argument(s). Run duraflow tasks --help.`);
  }
  return args.operands;
}

/** A whole number from `min`, or CliUsageError naming the flag. */
export function wholeNumberOf(flag: string, value: string | undefined, min: number): number | undefined {
  if (value === undefined) return undefined;
  const number = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(number) || number < min) {
    throw new CliUsageError(`${flag} must be a whole number from ${min}, got "${value}".`);
  }
  return number;
}

/** JSON text given on the command line, or CliUsageError naming the flag. */
export function jsonOf(flag: string, value: string | undefined): unknown {
  if (value === undefined) return undefined;
  try {
    return JSON.parse(value) as unknown;
  } catch (error) {
    throw new CliUsageError(`${flag} is not JSON (${(error as Error).message}): quote it for the shell, e.g. ${flag} '{"ok":true}'.`);
  }
}
