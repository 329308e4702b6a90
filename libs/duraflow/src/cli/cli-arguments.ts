import { CliUsageError } from './cli.errors';

export const USAGE = `Usage: duraflow <command> [options]

Commands:
  migrate   Apply Duraflow's migrations (the tables agent_tasks, step_runs, dead_letter_queue)
  status    Tasks by workflow and status, the oldest waiting task, dead letters, the reaper leader

Options:
  --url <postgres-url>   The database (default: DATABASE_URL)
  --redis <redis-url>    status: read the reaper leader from Redis (default: REDIS_URL; without
                         either, from the PostgreSQL leader lease row)
  --leader-key <key>     status: the reaper.leaderKey option of the app (default duraflow:reaper:leader)
  --json                 status: print JSON
  -h, --help             Show this help`;

export interface CliArguments {
  command: 'migrate' | 'status' | 'help';
  url?: string;
  redis?: string;
  leaderKey?: string;
  json: boolean;
}

const VALUE_OPTIONS = { '--url': 'url', '--redis': 'redis', '--leader-key': 'leaderKey' } as const;

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
    } else {
      throw new CliUsageError(`Unexpected argument "${flag}". Run duraflow --help.`);
    }
  }
  if (command === undefined) return parsed;
  if (command !== 'migrate' && command !== 'status') {
    throw new CliUsageError(`Unknown command "${command}": use migrate or status. Run duraflow --help.`);
  }
  return { ...parsed, command };
}

function splitOnce(argument: string): [string, string] {
  const at = argument.indexOf('=');
  return [argument.slice(0, at), argument.slice(at + 1)];
}
