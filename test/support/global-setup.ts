import path from 'node:path';
import { startTestServers, TestServers, TestServersError } from './test-servers';

/** Where the global teardown finds what the setup started (both run in Jest's main process). */
export const TEST_SERVERS_KEY = Symbol.for('duraflow.testServers');

/** The parts of Jest's global and project configs read here. */
interface GlobalConfig {
  rootDir: string;
  testPathPatterns?: { toExecutor?(options: { rootDir: string }): { isSet(): boolean; isMatch(file: string): boolean } };
}
interface ProjectConfig {
  testRegex?: string[];
}

const BENCH_SPEC = path.join('test', 'bench-quick.spec.ts');

/**
 * Jest's global setup: the PostgreSQL and Redis of the run (test-servers.ts), exported as
 * DATABASE_URL and REDIS_URL before the workers start, so they, and every process a test
 * starts with the environment it inherits, use them.
 */
export default async function globalSetup(config: GlobalConfig, project: ProjectConfig = {}): Promise<void> {
  let servers: TestServers;
  try {
    servers = await startTestServers({ needsPgbench: selects(config, project, path.join(config.rootDir, BENCH_SPEC)) });
  } catch (error) {
    // Jest prints a failed setup's stack: one line that says what to do is all there is to say.
    if (error instanceof TestServersError) error.stack = error.message;
    throw error;
  }
  Object.assign(process.env, servers.env);
  (globalThis as Record<symbol, unknown>)[TEST_SERVERS_KEY] = servers;
  if (servers.started) console.log(`\n${servers.started}`);
}

/** The run includes this test file: it is one of the project's, and no path pattern was given or one matches it. */
function selects(config: GlobalConfig, project: ProjectConfig, file: string): boolean {
  if (project.testRegex && !project.testRegex.some((regex) => new RegExp(regex).test(file))) return false;
  const executor = config.testPathPatterns?.toExecutor?.({ rootDir: config.rootDir });
  return !executor?.isSet() || executor.isMatch(file);
}
