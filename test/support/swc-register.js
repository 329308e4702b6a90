/**
 * A CommonJS require hook for child processes (`node -r ./test/support/swc-register.js entry.ts`):
 * compiles the project's .ts files with @swc/core, with the options jest.config.js uses too
 * (swc-options.js), so Nest DI gets its decorator metadata (tsx/esbuild emits none), and resolves
 * `@duraflow/nestjs` (and `@duraflow/nestjs/...`) to libs/duraflow/src, as the tsconfig paths do.
 *
 * Boot speed matters (tests start many of these): compiled output is cached on disk, keyed by
 * the source, the options (as resolved here, so an edit of swc-options.js misses the cache) and
 * the swc version, so a warm start never loads @swc/core; and the inline source maps are applied
 * to stack traces lazily, by this hook, rather than through Node's --enable-source-maps, which
 * would parse every .map file of node_modules at load.
 */
'use strict';

const Module = require('node:module');
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..', '..');
const LIBRARY_SOURCE = path.join(ROOT, 'libs', 'duraflow', 'src');
const LIBRARY_NAME = '@duraflow/nestjs';
const CACHE_DIR = path.join(ROOT, 'node_modules', '.cache', 'duraflow-swc-register');

/** The options jest.config.js gives @swc/jest (which adds the inline source maps the same way). */
const SWC_OPTIONS = {
  ...require('./swc-options'),
  swcrc: false,
  configFile: false,
};

const CACHE_SALT = `${require('@swc/core/package.json').version}\0${JSON.stringify(SWC_OPTIONS)}`;

/** Compiled output by file: what the stack trace mapping reads its source maps from. */
const compiled = new Map();

function compile(source, filename) {
  const key = createHash('sha1').update(CACHE_SALT).update('\0').update(filename).update('\0').update(source).digest('hex');
  const cacheFile = path.join(CACHE_DIR, `${key}.js`);
  let code;
  try {
    code = fs.readFileSync(cacheFile, 'utf8');
  } catch {
    code = require('@swc/core').transformSync(source, { ...SWC_OPTIONS, filename, sourceFileName: filename }).code;
    try {
      fs.mkdirSync(CACHE_DIR, { recursive: true });
      // Written aside then renamed: a process reading concurrently sees all of it or nothing.
      const partial = `${cacheFile}.${process.pid}.tmp`;
      fs.writeFileSync(partial, code);
      fs.renameSync(partial, cacheFile);
    } catch {
      // A cache that cannot be written only costs the next start a compile.
    }
  }
  compiled.set(filename, { code, map: undefined });
  return code;
}

require.extensions['.ts'] = function compileTypeScript(module, filename) {
  module._compile(compile(fs.readFileSync(filename, 'utf8'), filename), filename);
};

const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function resolveLibraryAlias(request, parent, isMain, options) {
  if (request === LIBRARY_NAME) {
    return resolveFilename.call(this, LIBRARY_SOURCE, parent, isMain, options);
  }
  if (request.startsWith(`${LIBRARY_NAME}/`)) {
    const target = path.join(LIBRARY_SOURCE, request.slice(LIBRARY_NAME.length + 1));
    return resolveFilename.call(this, target, parent, isMain, options);
  }
  return resolveFilename.call(this, request, parent, isMain, options);
};

/** The source map of a compiled file, parsed the first time a stack trace goes through it. */
function sourceMapOf(filename) {
  const entry = compiled.get(filename);
  if (!entry) return undefined;
  if (entry.map === undefined) {
    const inline = /\/\/# sourceMappingURL=data:application\/json;base64,([A-Za-z0-9+/=]+)\s*$/.exec(entry.code);
    entry.map = inline ? new Module.SourceMap(JSON.parse(Buffer.from(inline[1], 'base64').toString('utf8'))) : null;
  }
  return entry.map ?? undefined;
}

function mapCallSite(site) {
  const text = String(site);
  const filename = site.getFileName();
  const line = site.getLineNumber();
  const column = site.getColumnNumber();
  const map = filename && line && column ? sourceMapOf(filename) : undefined;
  const original = map?.findEntry(line - 1, column - 1);
  if (original?.originalLine === undefined) return text;
  return text.replace(`${filename}:${line}:${column}`, `${filename}:${original.originalLine + 1}:${original.originalColumn + 1}`);
}

Error.prepareStackTrace = (error, callSites) => {
  let header;
  try {
    header = Error.prototype.toString.call(error);
  } catch {
    header = '<error>';
  }
  return header + callSites.map((site) => `\n    at ${mapCallSite(site)}`).join('');
};
