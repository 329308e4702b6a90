// The library's architecture as lint rules (run by `npm test` through `npm run lint`):
// `layers` keeps every import pointing down the layers of ARCHITECTURE.md, and `no-cycle` keeps
// files from importing each other in a loop. A rule that only a document states is broken by the
// next feature; these make the wrong import fail.
import fs from 'node:fs';
import path from 'node:path';

const EXTENSIONS = ['.ts', '.tsx', '.js', '.mjs', '.cjs'];

/** The file a relative import names, or undefined (a package, or a file this tree does not hold). */
export function resolveImport(fromFile, specifier) {
  if (!specifier.startsWith('.')) return undefined;
  const base = path.resolve(path.dirname(fromFile), specifier);
  for (const candidate of [base, ...EXTENSIONS.map((ext) => base + ext), ...EXTENSIONS.map((ext) => path.join(base, 'index' + ext))]) {
    if (fs.existsSync(candidate) && fs.statSync(candidate).isFile()) return candidate;
  }
  if (base.endsWith('.js')) {
    const ts = base.slice(0, -3) + '.ts';
    if (fs.existsSync(ts)) return ts;
  }
  return undefined;
}

const IMPORT_SPECIFIER =
  /(?:^|[\s;])(?:import|export)\s[^'"`;]*?from\s*['"]([^'"]+)['"]|(?:^|[\s;(=])import\s*\(\s*['"]([^'"]+)['"]\s*\)|require\(\s*['"]([^'"]+)['"]\s*\)|^\s*import\s+['"]([^'"]+)['"]/gm;

/** Every relative import of a file read from disk, resolved (a cache per lint run). */
const importsOf = new Map();
function fileImports(file) {
  let found = importsOf.get(file);
  if (found) return found;
  found = [];
  let source = '';
  try {
    source = fs.readFileSync(file, 'utf8');
  } catch {
    // unreadable: no edges
  }
  for (const match of source.matchAll(IMPORT_SPECIFIER)) {
    const target = resolveImport(file, match[1] ?? match[2] ?? match[3] ?? match[4]);
    if (target) found.push(target);
  }
  importsOf.set(file, found);
  return found;
}

/** The import specifiers of the linted file, with the node to report on. */
function importVisitors(onImport) {
  const visit = (node) => {
    if (node.source && typeof node.source.value === 'string') onImport(node, node.source.value);
  };
  return {
    ImportDeclaration: visit,
    ExportNamedDeclaration: visit,
    ExportAllDeclaration: visit,
    ImportExpression(node) {
      if (node.source.type === 'Literal' && typeof node.source.value === 'string') onImport(node, node.source.value);
    },
  };
}

const layers = {
  meta: {
    type: 'problem',
    docs: { description: 'Imports point down the layers: a file imports only from its own folder or from the layers below it.' },
    schema: [
      {
        type: 'object',
        properties: { root: { type: 'string' }, layers: { type: 'array', items: { type: 'array', items: { type: 'string' } } } },
        required: ['root', 'layers'],
        additionalProperties: false,
      },
    ],
    messages: {
      up: '{{from}} (layer {{fromRank}}, {{fromLayer}}) imports {{to}} (layer {{toRank}}, {{toLayer}}): imports point down. Move what both need below {{fromLayer}}, or let the upper layer call down instead.',
      unplaced: '{{file}} is in no layer of eslint.config.mjs: give {{entry}} a layer there (and in ARCHITECTURE.md).',
    },
  },
  create(context) {
    const { root, layers: ranks } = context.options[0];
    const rootDir = path.resolve(context.cwd, root);
    const file = context.filename;
    if (!file.startsWith(rootDir + path.sep)) return {};
    const entryOf = (target) => path.relative(rootDir, target).split(path.sep)[0];
    const rankOf = new Map();
    ranks.forEach((entries, rank) => entries.forEach((entry) => rankOf.set(entry.replace(/\/$/, ''), rank)));
    const layerName = (rank) => ranks[rank].join(' ');
    const from = entryOf(file);
    const fromRank = rankOf.get(from);
    return {
      Program(node) {
        if (fromRank === undefined)
          context.report({ node, messageId: 'unplaced', data: { file: path.relative(context.cwd, file), entry: from } });
      },
      ...importVisitors((node, specifier) => {
        const target = resolveImport(file, specifier);
        if (!target || !target.startsWith(rootDir + path.sep) || fromRank === undefined) return;
        const to = entryOf(target);
        const toRank = rankOf.get(to);
        if (to === from || toRank === undefined || toRank < fromRank) return;
        context.report({
          node,
          messageId: 'up',
          data: {
            from: path.relative(rootDir, file),
            to: path.relative(rootDir, target),
            fromRank: String(fromRank),
            toRank: String(toRank),
            fromLayer: layerName(fromRank),
            toLayer: layerName(toRank),
          },
        });
      }),
    };
  },
};

const noCycle = {
  meta: {
    type: 'problem',
    docs: { description: 'No file reaches itself through its imports (type imports included).' },
    schema: [],
    messages: {
      cycle: 'Import cycle: {{cycle}}. Move what the files share into a file both import, or let one call the other through a parameter.',
    },
  },
  create(context) {
    const file = context.filename;
    const cwd = context.cwd;
    /** A path from `start` back to `file`, or undefined. */
    const loopBack = (start) => {
      const seen = new Set();
      const stack = [[start, [start]]];
      while (stack.length) {
        const [current, trail] = stack.pop();
        if (current === file) return trail;
        if (seen.has(current)) continue;
        seen.add(current);
        for (const next of fileImports(current)) stack.push([next, [...trail, next]]);
      }
      return undefined;
    };
    return importVisitors((node, specifier) => {
      const target = resolveImport(file, specifier);
      if (!target || target.includes(`${path.sep}node_modules${path.sep}`)) return;
      const trail = loopBack(target);
      if (trail)
        context.report({ node, messageId: 'cycle', data: { cycle: [file, ...trail].map((f) => path.relative(cwd, f)).join(' -> ') } });
    });
  },
};

/** SQL that writes a task row: a move of its lifecycle. */
const TASK_WRITE = /\b(UPDATE|INSERT\s+INTO|DELETE\s+FROM)\s+agent_tasks\b/i;

const taskLifecycle = {
  meta: {
    type: 'problem',
    docs: { description: 'Only the task lifecycle module writes agent_tasks: every status change is one of its named moves.' },
    schema: [{ type: 'object', properties: { owner: { type: 'string' } }, required: ['owner'], additionalProperties: false }],
    messages: {
      outside:
        'This SQL writes agent_tasks outside {{owner}}: a task changes only through a move of its lifecycle. Add or extend a move there (task-lifecycle.ts, TaskTransitions) and call it.',
    },
  },
  create(context) {
    const owner = path.resolve(context.cwd, context.options[0].owner);
    if (context.filename.startsWith(owner + path.sep)) return {};
    const check = (node, text) => {
      if (TASK_WRITE.test(text)) context.report({ node, messageId: 'outside', data: { owner: context.options[0].owner } });
    };
    return {
      Literal(node) {
        if (typeof node.value === 'string') check(node, node.value);
      },
      TemplateLiteral(node) {
        check(node, node.quasis.map((quasi) => quasi.value.cooked ?? quasi.value.raw).join(' '));
      },
    };
  },
};

export default { rules: { layers, 'no-cycle': noCycle, 'task-lifecycle': taskLifecycle } };
