import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/** A ```ts (or ```typescript) block of a markdown file, as a module of its own. */
export interface DocsCodeBlock {
  /** The markdown file, relative to the repository root. */
  markdown: string;
  /** The markdown line (1-based) of the block's first line of code. */
  line: number;
  code: string;
  /**
   * Where the block is written, relative to its markdown file's folder in the check's directory:
   * the path its first line names (`// src/app.module.ts`), so the blocks of one page can import
   * each other as the files of one app do, else `block-<line>.ts`.
   */
  modulePath: string;
}

/** A block that does not compile, or a markdown fence that cannot be read. */
export interface DocsCodeFailure {
  markdown: string;
  line: number;
  message: string;
}

const TYPESCRIPT_FENCE = /^(ts|typescript)$/i;
/** The first line of a block that names its file: `// src/greeting.workflow.ts`. */
const FILE_NAME_LINE = /^\/\/ ((?:[\w@.-]+\/)*[\w@.-]+\.ts)\s*$/;

/** README.md and every markdown file under docs/, as paths relative to the root. */
export function documentationFiles(root: string): string[] {
  const files = ['README.md'];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const relative = path.posix.join(dir, entry.name);
      if (entry.isDirectory()) walk(relative);
      else if (entry.name.endsWith('.md')) files.push(relative);
    }
  };
  walk('docs');
  return files;
}

/**
 * The TypeScript blocks of one markdown text. Fences may be indented (inside a list item): that
 * indentation is taken off the code. An unclosed fence is a failure, not a silently skipped block.
 */
export function typeScriptBlocks(markdown: string, text: string): { blocks: DocsCodeBlock[]; failures: DocsCodeFailure[] } {
  const lines = text.split('\n');
  const blocks: DocsCodeBlock[] = [];
  const failures: DocsCodeFailure[] = [];
  for (let index = 0; index < lines.length; index++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)/.exec(lines[index]);
    if (!open) continue;
    const [, indent, fence, language] = open;
    const close = new RegExp(`^\\s*${fence[0] === '`' ? '`' : '~'}{${fence.length},}\\s*$`);
    let end = index + 1;
    while (end < lines.length && !close.test(lines[end])) end++;
    if (end === lines.length) {
      failures.push({ markdown, line: index + 1, message: `the ${fence} fence opened here is never closed` });
      break;
    }
    if (TYPESCRIPT_FENCE.test(language)) {
      const code = lines
        .slice(index + 1, end)
        .map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line.trimStart()))
        .join('\n');
      const named = FILE_NAME_LINE.exec(code.split('\n')[0] ?? '');
      blocks.push({ markdown, line: index + 2, code: `${code}\n`, modulePath: named ? named[1] : `block-${index + 2}.ts` });
    }
    index = end;
  }
  return { blocks, failures };
}

/** The options the blocks are checked with: a strict Nest app's, with `@duraflow/nestjs` mapped to the library's sources. */
export function docsCompilerOptions(root: string): ts.CompilerOptions {
  return {
    strict: true,
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    module: ts.ModuleKind.CommonJS,
    moduleResolution: ts.ModuleResolutionKind.Node10,
    moduleDetection: ts.ModuleDetectionKind.Force,
    target: ts.ScriptTarget.ES2022,
    esModuleInterop: true,
    skipLibCheck: true,
    noEmit: true,
    // jest: a block may be a test of the user's app (describe, it, expect are also Vitest's globals).
    types: ['node', 'jest'],
    typeRoots: [path.join(root, 'node_modules/@types')],
    baseUrl: root,
    paths: {
      '@duraflow/nestjs': [path.join(root, 'libs/duraflow/src')],
      '@duraflow/nestjs/*': [path.join(root, 'libs/duraflow/src/*')],
    },
  };
}

/**
 * Writes every block as a module of its own under `outDir` (one folder per markdown file) and
 * type-checks them in one program. Only the blocks' own diagnostics are reported (the library
 * is checked by `npm run typecheck`), each at its markdown file and line.
 */
export function typeCheckBlocks(root: string, outDir: string, blocks: DocsCodeBlock[]): DocsCodeFailure[] {
  const failures: DocsCodeFailure[] = [];
  const byFile = new Map<string, DocsCodeBlock>();
  for (const block of blocks) {
    const file = path.join(outDir, block.markdown.replace(/\.md$/, '').replace(/[^\w/-]/g, '_'), block.modulePath);
    const earlier = byFile.get(file);
    if (earlier) {
      failures.push({
        markdown: block.markdown,
        line: block.line,
        message: `a second block names the file ${block.modulePath} (first at line ${earlier.line})`,
      });
      continue;
    }
    byFile.set(file, block);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, block.code);
  }

  const program = ts.createProgram([...byFile.keys()], docsCompilerOptions(root));
  const general = [...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics()];
  for (const diagnostic of general) {
    failures.push({ markdown: '(compiler)', line: 0, message: ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n') });
  }
  for (const [file, block] of byFile) {
    const source = program.getSourceFile(file);
    if (!source) {
      failures.push({ markdown: block.markdown, line: block.line, message: 'the compiler did not read this block' });
      continue;
    }
    for (const diagnostic of [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)]) {
      const line = diagnostic.start === undefined ? 0 : source.getLineAndCharacterOfPosition(diagnostic.start).line;
      failures.push({
        markdown: block.markdown,
        line: block.line + line,
        message: `TS${diagnostic.code}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ')}`,
      });
    }
  }
  return failures;
}

/** Every TypeScript block of README.md and docs/, and the fences that could not be read. */
export function collectDocumentationBlocks(root: string): { blocks: DocsCodeBlock[]; failures: DocsCodeFailure[] } {
  const blocks: DocsCodeBlock[] = [];
  const failures: DocsCodeFailure[] = [];
  for (const markdown of documentationFiles(root)) {
    const found = typeScriptBlocks(markdown, readFileSync(path.join(root, markdown), 'utf8'));
    blocks.push(...found.blocks);
    failures.push(...found.failures);
  }
  return { blocks, failures };
}

export function formatFailure(failure: DocsCodeFailure): string {
  return `${failure.markdown}:${failure.line}: ${failure.message}`;
}
