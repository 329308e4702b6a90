import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

/*
 * The layers of ARCHITECTURE.md, the ban on import cycles and the one owner of the task
 * lifecycle are lint rules (eslint/architecture.mjs), run by `npm test`. These specs show that
 * each rule refuses the wrong way: a file's text is linted as if it stood at a path of the
 * library (ESLint's --stdin-filename), so nothing is written to the tree.
 */

const ROOT = path.join(__dirname, '..');
const ESLINT = path.join(ROOT, 'node_modules', '.bin', 'eslint');

/** The rule ids ESLint reports for `code` placed at `file` (a path under libs/duraflow/src). */
async function ruleViolations(file: string, code: string): Promise<string[]> {
  const child = promisify(execFile)(ESLINT, ['--format', 'json', '--stdin', '--stdin-filename', path.join(ROOT, file)], { cwd: ROOT });
  child.child.stdin!.end(code);
  const { stdout } = await child.catch((error: { stdout: string }) => ({ stdout: error.stdout }));
  const [result] = JSON.parse(stdout) as Array<{ messages: Array<{ ruleId: string | null; message: string }> }>;
  return result.messages.map((message) => `${message.ruleId}: ${message.message}`);
}

describe('the architecture, as the linter enforces it', () => {
  it('refuses an import that points up the layers', async () => {
    const found = await ruleViolations(
      'libs/duraflow/src/persistence/probe.ts',
      `import { TaskExecutor } from '../execution/task-executor';\nexport const probe = TaskExecutor;\n`,
    );
    expect(found).toEqual([
      expect.stringMatching(/^duraflow\/layers: persistence\/probe\.ts \(layer \d+, persistence\) imports execution\/task-executor\.ts/),
    ]);
  });

  it('refuses an import cycle, type imports included', async () => {
    // The lifecycle's task-lifecycle.ts is imported by claim-tasks.ts: importing it back closes a loop.
    const found = await ruleViolations(
      'libs/duraflow/src/persistence/lifecycle/task-lifecycle.ts',
      `import type { ClaimedTask } from './claim-tasks';\nexport type Probe = ClaimedTask;\n`,
    );
    expect(found).toEqual([
      expect.stringMatching(/^duraflow\/no-cycle: Import cycle: .*task-lifecycle\.ts -> .*claim-tasks\.ts -> .*task-lifecycle\.ts/),
    ]);
  });

  it('refuses SQL that writes agent_tasks outside the lifecycle module', async () => {
    const code = `export const probe = \`UPDATE agent_tasks SET status = 'failed' WHERE id = $1\`;\n`;
    expect(await ruleViolations('libs/duraflow/src/services/probe.ts', code)).toEqual([
      expect.stringMatching(/^duraflow\/task-lifecycle: /),
    ]);
    expect(await ruleViolations('libs/duraflow/src/persistence/lifecycle/probe.ts', code)).toEqual([]);
  });

  it('refuses a library file over 300 lines and a function over 60', async () => {
    const longFunction = `export function probe(): number {\n  let n = 0;\n${'  n++;\n'.repeat(60)}  return n;\n}\n`;
    const found = await ruleViolations('libs/duraflow/src/util/probe.ts', `${longFunction}${'// filler\n'.repeat(240)}`);
    expect(found).toEqual([expect.stringMatching(/^max-lines-per-function: /), expect.stringMatching(/^max-lines: /)]);
  });
});
