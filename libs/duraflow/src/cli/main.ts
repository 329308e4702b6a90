#!/usr/bin/env node
/**
 * The `duraflow` command of the package: `npx duraflow migrate`, `status`, `replay-check`, `export-runs` and `tasks`.
 * Every failure is one line on stderr and a non-zero exit (2 for a wrong command line or URL,
 * 1 for a server that cannot be reached or a command that failed), never a stack trace.
 * `tasks` prints the error's code in that line and exits 3 when the database cannot be reached,
 * so a script tells "refused" (1) from "try again later" (3).
 */
import { codecFromEnv } from '../codec/codec-from-env';
import { DuraflowError } from '../domain/errors/duraflow.error';
import { ReplayCheckInputError } from '../domain/errors/deploy.errors';
import { CliArguments, parseCliArguments, USAGE } from './cli-arguments';
import { CliUsageError, DatabaseUnreachableError, InvalidDatabaseUrlError } from './cli.errors';
import { databaseUrlOf } from './database-connection';
import { migrateCommand } from './migrate.command';
import { reencryptCommand } from './reencrypt.command';
import { exportRunsCommand, replayCheckCommand } from './replay-check.command';
import { statusCommand } from './status.command';
import { parseTasksArguments } from './tasks-arguments';
import { tasksCommand } from './tasks.command';
import { terminalLines, terminalText } from './terminal-text';

export async function runCli(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  // The formatters escape each value they print; this escapes whatever a line still holds.
  const print = (line: string) => process.stdout.write(`${terminalLines(line)}\n`);
  let args: CliArguments;
  try {
    args = parseCliArguments(argv);
  } catch (error) {
    return fail(argv, error);
  }
  if (args.command === 'tasks') return runTasksCli(args, env, print);
  if (args.command === 'reencrypt') return runReencryptCli(args, env, print);
  try {
    if (args.command === 'help') {
      print(USAGE);
      return 0;
    }
    const query = {
      includeFinished: args.includeFinished,
      workflowNames: args.workflow ? [args.workflow] : undefined,
      limit: limitOf(args.limit),
    };
    if (args.command === 'replay-check') {
      const url = args.from ? undefined : databaseUrlOf(args.url, env);
      return await replayCheckCommand(
        { module: args.module, url, from: args.from, json: args.json, query, codec: codecFromEnv(env) },
        print,
      );
    }
    const url = databaseUrlOf(args.url, env);
    if (args.command === 'migrate') {
      await migrateCommand(url, print);
    } else if (args.command === 'export-runs') {
      await exportRunsCommand(url, { out: args.out, force: args.force === true, query, codec: codecFromEnv(env) }, print);
    } else {
      const redis = args.redis ?? (env.REDIS_URL || undefined);
      await statusCommand({ url, redis, leaderKey: args.leaderKey, json: args.json }, print);
    }
    return 0;
  } catch (error) {
    return fail(argv, error);
  }
}

/** One line on stderr; 2 for a wrong command line or URL, 1 for anything else. */
function fail(argv: string[], error: unknown): number {
  const command = argv.find((argument) => !argument.startsWith('-')) ?? '';
  const message = error instanceof DuraflowError ? error.message : `${command || 'duraflow'} failed: ${oneLine(error)}`;
  process.stderr.write(`duraflow: ${terminalText(message)}\n`);
  return error instanceof CliUsageError || error instanceof InvalidDatabaseUrlError || error instanceof ReplayCheckInputError ? 2 : 1;
}

/** `duraflow tasks …`: exit 0 done, 1 refused or not found, 2 a wrong command line, 3 the database unreachable. */
async function runTasksCli(given: CliArguments, env: NodeJS.ProcessEnv, print: (line: string) => void): Promise<number> {
  try {
    const parsed = parseTasksArguments(given.rest ?? []);
    const args = { ...parsed, url: parsed.url ?? given.url, json: parsed.json || given.json };
    await tasksCommand(args, args.subcommand === 'help' ? '' : databaseUrlOf(args.url, env), print, env);
    return 0;
  } catch (error) {
    const message = error instanceof DuraflowError ? `${error.code}: ${error.message}` : `tasks failed: ${oneLine(error)}`;
    process.stderr.write(`duraflow: ${terminalText(message)}\n`);
    if (error instanceof DatabaseUnreachableError) return 3;
    return error instanceof DuraflowError && USAGE_CODES.includes(error.code) ? 2 : 1;
  }
}

/** `duraflow reencrypt`: exit 0 every value under the current key, 1 some no key opens, 2 a wrong command line or keys, 3 the database unreachable. */
async function runReencryptCli(args: CliArguments, env: NodeJS.ProcessEnv, print: (line: string) => void): Promise<number> {
  try {
    return await reencryptCommand(databaseUrlOf(args.url, env), { batchSize: args.batchSize, json: args.json }, env, print);
  } catch (error) {
    const message = error instanceof DuraflowError ? `${error.code}: ${error.message}` : `reencrypt failed: ${oneLine(error)}`;
    process.stderr.write(`duraflow: ${terminalText(message)}\n`);
    if (error instanceof DatabaseUnreachableError) return 3;
    return error instanceof DuraflowError && [...USAGE_CODES, 'INVALID_OPTIONS'].includes(error.code) ? 2 : 1;
  }
}

/** The errors of a wrong command line: a flag's value the library refuses is one too. */
const USAGE_CODES = ['CLI_USAGE', 'INVALID_DATABASE_URL', 'INVALID_LIST_OPTIONS', 'INVALID_CURSOR'];

function limitOf(limit: string | undefined): number | undefined {
  if (limit === undefined) return undefined;
  const value = Number(limit);
  if (!Number.isSafeInteger(value) || value < 1) throw new CliUsageError(`--limit must be a whole number from 1, got "${limit}".`);
  return value;
}

function oneLine(error: unknown): string {
  const message = error instanceof Error ? error.message || error.name : String(error);
  return message.replace(/\s+/g, ' ').trim();
}

if (require.main === module) {
  void runCli(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
