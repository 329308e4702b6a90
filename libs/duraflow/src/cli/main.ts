#!/usr/bin/env node
/**
 * The `duraflow` command of the package: `npx duraflow migrate` and `npx duraflow status`.
 * Every failure is one line on stderr and a non-zero exit (2 for a wrong command line or URL,
 * 1 for a server that cannot be reached or a command that failed), never a stack trace.
 */
import { DuraflowError } from '../errors/duraflow.error';
import { parseCliArguments, USAGE } from './cli-arguments';
import { CliUsageError, InvalidDatabaseUrlError } from './cli.errors';
import { databaseUrlOf } from './database-connection';
import { migrateCommand } from './migrate.command';
import { statusCommand } from './status.command';

export async function runCli(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const print = (line: string) => process.stdout.write(`${line}\n`);
  try {
    const args = parseCliArguments(argv);
    if (args.command === 'help') {
      print(USAGE);
      return 0;
    }
    const url = databaseUrlOf(args.url, env);
    if (args.command === 'migrate') {
      await migrateCommand(url, print);
    } else {
      const redis = args.redis ?? (env.REDIS_URL || undefined);
      await statusCommand({ url, redis, leaderKey: args.leaderKey, json: args.json }, print);
    }
    return 0;
  } catch (error) {
    const command = argv.find((argument) => !argument.startsWith('-')) ?? '';
    const message = error instanceof DuraflowError ? error.message : `${command || 'duraflow'} failed: ${oneLine(error)}`;
    process.stderr.write(`duraflow: ${message}\n`);
    return error instanceof CliUsageError || error instanceof InvalidDatabaseUrlError ? 2 : 1;
  }
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
