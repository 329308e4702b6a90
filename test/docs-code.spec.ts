import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import {
  collectDocumentationBlocks,
  DocsCodeBlock,
  DocsCodeFailure,
  formatFailure,
  typeCheckBlocks,
  typeScriptBlocks,
} from './support/docs-code';

const ROOT = path.resolve(__dirname, '..');

/** A page with one block that must not compile, checked in the same program: proof that a broken block fails. */
const BROKEN_PAGE = 'docs-code self-test.md';
const BROKEN_TEXT = [
  '# A page with a mistake',
  '',
  '```ts',
  "import { WorkflowService } from '@duraflow/nestjs';",
  'declare const workflows: WorkflowService;',
  "void workflows.submitt('booking', {});",
  '```',
  '',
].join('\n');

describe('the TypeScript in README.md and docs/', () => {
  let blocks: DocsCodeBlock[];
  let fenceFailures: DocsCodeFailure[];
  let failures: DocsCodeFailure[];
  let outDir: string;

  beforeAll(() => {
    ({ blocks, failures: fenceFailures } = collectDocumentationBlocks(ROOT));
    // Inside the repository, so the blocks' imports of @nestjs/*, typeorm… resolve from its node_modules.
    mkdirSync(path.join(ROOT, '.test-build'), { recursive: true });
    outDir = mkdtempSync(path.join(ROOT, '.test-build', 'docs-code-'));
    failures = typeCheckBlocks(ROOT, outDir, [...blocks, ...typeScriptBlocks(BROKEN_PAGE, BROKEN_TEXT).blocks]);
  }, 60_000);

  afterAll(() => {
    if (outDir) rmSync(outDir, { recursive: true, force: true });
  });

  it('finds the blocks of the README and of every guide', () => {
    expect(fenceFailures.map(formatFailure)).toEqual([]);
    expect(blocks.filter((block) => block.markdown === 'README.md').length).toBeGreaterThan(0);
    expect(blocks.filter((block) => block.markdown.startsWith('docs/')).length).toBeGreaterThan(0);
  });

  it('type-checks every block against the package, each a module of its own', () => {
    expect(failures.filter((failure) => failure.markdown !== BROKEN_PAGE).map(formatFailure)).toEqual([]);
  });

  it('reports a block that does not compile with its markdown file and line', () => {
    expect(failures.filter((failure) => failure.markdown === BROKEN_PAGE).map(formatFailure)).toEqual([
      expect.stringMatching(/^docs-code self-test\.md:6: TS2551: Property 'submitt' does not exist on type 'WorkflowService'/),
    ]);
  });
});
