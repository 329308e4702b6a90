import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { SWC_REGISTER } from './typescript-node';

const execFileAsync = promisify(execFile);
const CLI = path.join(__dirname, '..', '..', 'libs', 'duraflow', 'src', 'cli', 'main.ts');

/** npx and tsx start slowly when other suites load the machine. */
export const CLI_TIMEOUT_MS = 60_000;

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** `npx duraflow …` from the library's source, with only the environment given: DATABASE_URL and REDIS_URL only when passed. */
export async function duraflowCli(args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  const { DATABASE_URL: _database, REDIS_URL: _redis, ...inherited } = process.env;
  try {
    const { stdout, stderr } = await execFileAsync(process.execPath, ['-r', SWC_REGISTER, CLI, ...args], {
      env: { ...inherited, ...env },
      timeout: CLI_TIMEOUT_MS,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout: string; stderr: string };
    return { code: typeof failed.code === 'number' ? failed.code : -1, stdout: failed.stdout, stderr: failed.stderr };
  }
}
