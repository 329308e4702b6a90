import { CliUsageError } from './cli.errors';

export const USAGE = `Usage: duraflow <command> [options]

Commands:
  migrate   Apply Duraflow's migrations (the tables agent_tasks, step_runs, dead_letter_queue)
  status    Tasks by workflow and status, unfinished tasks per workflow version, the oldest waiting
            task, dead letters, the reaper leader
  replay-check --module <file>[#Export]
            Replay recorded runs against today's workflow code (no step body runs) and report each
            run whose path diverges; exits 1 when one does. <file> exports the app's Nest module
            (booted without its worker and reaper) or workflow definitions and @Workflow classes.
            Runs come from the database (default: the unfinished ones) or --from a file
  export-runs --out <file.json>
            Write the database's recorded runs to a new file readable by its owner only (0600), for
            replay-check --from in a CI without the database; never through a symbolic link
  tasks list|show|cancel|resume|signal|retry|fork
            List, inspect and act on tasks (duraflow tasks --help), --json for scripts
  reencrypt Rewrite every stored payload not sealed under the current key (plaintext, or an older
            key) with it, in batches; keys from DURAFLOW_CODEC_KEYS=id:base64,... and
            DURAFLOW_CODEC_CURRENT=id. Exit 0 all rewritten, 1 some rows no key opens, 2 a wrong
            command line or keys, 3 the database unreachable

Options:
  --url <postgres-url>   The database (default: DATABASE_URL)
  --redis <redis-url>    status: read the reaper leader from Redis (default: REDIS_URL; without
                         either, from the PostgreSQL leader lease row)
  --leader-key <key>     status: the reaper.leaderKey option of the app (default duraflow:reaper:leader)
  --json                 status, replay-check: print JSON
  --module <file>        replay-check: where today's workflows are (a compiled .js file; #Name picks an export)
  --from <file.json>     replay-check: the runs export-runs wrote, instead of the database
  --out <file.json>      export-runs: where to write
  --force                export-runs: replace the file at --out if there is one (never a link)
  --include-finished     replay-check, export-runs: finished runs too (default: unfinished runs only)
  --workflow <name>      replay-check, export-runs: only this workflow
  --limit <n>            replay-check, export-runs: at most n runs, newest first (default 1000)
  --batch-size <n>       reencrypt: rows per transaction (default 500)
  -h, --help             Show this help`;

const COMMANDS = ['migrate', 'status', 'replay-check', 'export-runs', 'tasks', 'reencrypt'] as const;

export interface CliArguments {
  command: (typeof COMMANDS)[number] | 'help';
  url?: string;
  redis?: string;
  leaderKey?: string;
  json: boolean;
  module?: string;
  from?: string;
  out?: string;
  workflow?: string;
  limit?: string;
  batchSize?: string;
  includeFinished?: boolean;
  force?: boolean;
  /** tasks: the arguments after `tasks`, which its own parser reads (tasks-arguments.ts). */
  rest?: string[];
}

const VALUE_OPTIONS = {
  '--url': 'url',
  '--redis': 'redis',
  '--leader-key': 'leaderKey',
  '--module': 'module',
  '--from': 'from',
  '--out': 'out',
  '--workflow': 'workflow',
  '--limit': 'limit',
  '--batch-size': 'batchSize',
} as const;

/** `argv` without node and the script: `['status', '--url', 'postgres://…']`. */
export function parseCliArguments(argv: string[]): CliArguments {
  const parsed: CliArguments = { command: 'help', json: false };
  let command: string | undefined;
  for (let index = 0; index < argv.length; index++) {
    const argument = argv[index];
    const [flag, inlineValue] = argument.startsWith('--') && argument.includes('=') ? splitOnce(argument) : [argument, undefined];
    if (flag === '-h' || flag === '--help') return { command: 'help', json: false };
    if (flag === '--json') {
      parsed.json = true;
    } else if (flag === '--include-finished') {
      parsed.includeFinished = true;
    } else if (flag === '--force') {
      parsed.force = true;
    } else if (flag in VALUE_OPTIONS) {
      const value = inlineValue ?? argv[++index];
      if (value === undefined || value === '' || (inlineValue === undefined && value.startsWith('--'))) {
        throw new CliUsageError(`${flag} needs a value. Run duraflow --help.`);
      }
      parsed[VALUE_OPTIONS[flag as keyof typeof VALUE_OPTIONS]] = value;
    } else if (flag.startsWith('-')) {
      throw new CliUsageError(`Unknown option ${flag}. Run duraflow --help.`);
    } else if (command === undefined) {
      command = flag;
      if (command === 'tasks') return { ...parsed, command, rest: argv.slice(index + 1) };
    } else {
      throw new CliUsageError(`Unexpected argument "${flag}". Run duraflow --help.`);
    }
  }
  if (command === undefined) return parsed;
  if (!(COMMANDS as readonly string[]).includes(command)) {
    throw new CliUsageError(`Unknown command "${command}": use ${COMMANDS.join(', ')}. Run duraflow --help.`);
  }
  return { ...parsed, command: command as CliArguments['command'] };
}

function splitOnce(argument: string): [string, string] {
  const at = argument.indexOf('=');
  return [argument.slice(0, at), argument.slice(at + 1)];
}
