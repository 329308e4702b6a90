import { builtinModules } from 'node:module';
import { cp, mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import {
  HOST_APP_SOURCE,
  HostAppFlavour,
  HostAppProcess,
  PreparedHostApp,
  prepareHostApp,
  prepareVariant,
} from './fixtures/consumer/host-app';
import { hostEnvironment, run, runOrThrow } from './fixtures/consumer/npm';
import { NEST_MAJORS, NestMajor, NestNewRun, runNestNewApp, testCounts } from './fixtures/consumer/nest-new';
import { eventually, sleep } from './support/waiting';
import { TestDatabase } from './support/database';
import { useTestBed } from './support/test-bed';
import { SHARED_REDIS_URL } from './support/redis-server';
import { DURAFLOW_MIGRATION_NAMES } from './support/migration-names';

/**
 * The library as its users get it: `npm pack` (and `npm run pack:lib` on a fresh checkout, which
 * must make the same files), installed from the tarball into a fresh copy of examples/host-app for
 * the lowest and the highest NestJS this package supports, type-checked with `tsc --strict` against
 * the shipped .d.ts, booted on a database of its own, driven over HTTP; and into the app `nest new`
 * generates with each CLI major, as the README says, whose own unit, e2e and lint scripts must pass.
 */

const REPO_ROOT = path.join(__dirname, '..');
const LIBRARY_DIR = path.join(REPO_ROOT, 'libs', 'duraflow');
const STEP_TIMEOUT_MS = 600_000;

/** The lowest release of every peer this package declares (and TypeScript 5.0), without the optional ioredis. */
const LOWEST: HostAppFlavour = {
  label: 'NestJS 10.0.0, TypeORM 0.3.20, TypeScript 5.0, CommonJS, no ioredis',
  packages: [
    '@nestjs/common@10.0.0',
    '@nestjs/core@10.0.0',
    '@nestjs/platform-express@10.0.0',
    '@nestjs/config@3.0.0',
    '@nestjs/schedule@4.0.0',
    '@nestjs/typeorm@10.0.0',
    'typeorm@0.3.20',
    'pg@8.11.0',
    'class-validator@0.14.0',
    'class-transformer@0.5.1',
    'reflect-metadata@0.1.13',
    'rxjs@7.8.1',
    'typescript@5.0.4',
    '@types/node@20.19.0',
  ],
};

/** What examples/host-app/package.json names: the newest majors (NestJS 12, TypeORM 1, TypeScript 6). */
async function highestFlavour(esm: boolean): Promise<HostAppFlavour> {
  const manifest = JSON.parse(await readFile(path.join(HOST_APP_SOURCE, 'package.json'), 'utf8'));
  const packages = Object.entries<string>({ ...manifest.dependencies, ...manifest.devDependencies })
    .filter(([name]) => name !== '@duraflow/nestjs')
    .map(([name, range]) => `${name}@${range}`);
  return { label: `the newest majors, ${esm ? 'ES modules' : 'CommonJS'}, with ioredis`, packages, esm };
}

interface Packed {
  tarball: string;
  size: number;
  unpackedSize: number;
  files: string[];
  extracted: string;
}

describe('the npm package @duraflow/nestjs, installed into a host app', () => {
  let workDir: string;
  let packed: Packed;
  let lowest: Promise<PreparedHostApp>;
  let highest: Promise<PreparedHostApp>;
  const generated = new Map<NestMajor, Promise<NestNewRun>>();
  let freshPack: Promise<string[]>;
  const bed = useTestBed({ database: false });
  const summary: string[] = [];

  beforeAll(async () => {
    workDir = await mkdtemp(path.join(os.tmpdir(), 'duraflow-consumer-'));
    packed = await pack(workDir);
    freshPack = packFromFreshCheckout(path.join(workDir, 'fresh'));
    freshPack.catch(() => undefined);
    // The two installs overlap: they wait mostly on the npm cache and the disk.
    lowest = prepareHostApp(path.join(workDir, 'nest-lowest'), packed.tarball, LOWEST);
    highest = highestFlavour(false).then((flavour) => prepareHostApp(path.join(workDir, 'nest-highest'), packed.tarball, flavour));
    lowest.catch(() => undefined);
    highest.catch(() => undefined);
    // Their databases are made here, so the bed drops them after the file, not after a test.
    for (const major of NEST_MAJORS) {
      const db = await database();
      const run = runNestNewApp(major, path.join(workDir, `nest-new-${major}`), packed.tarball, db.url);
      run.catch(() => undefined);
      generated.set(major, run);
    }
  }, STEP_TIMEOUT_MS);

  afterAll(async () => {
    await Promise.allSettled([lowest, highest, freshPack, ...generated.values()]);
    if (workDir) await rm(workDir, { recursive: true, force: true });
    if (summary.length) console.log(summary.join('\n'));
  }, STEP_TIMEOUT_MS);

  /** A database of its own for one host app, which migrates it (dropped after the test). */
  function database(): Promise<TestDatabase> {
    return bed.createDatabase({ migrate: false, prefix: 'duraflow_host' });
  }

  describe('the tarball', () => {
    it('holds the built JavaScript and declarations only: no tests, bench, engine, sources or source maps', () => {
      const unexpected = packed.files.filter((file) => !/^(package\.json|README\.md|dist\/.+\.(js|d\.ts))$/.test(file));
      expect(unexpected).toEqual([]);
      expect(packed.files.filter((file) => /(^|\/)(test|tests|bench|__tests__|examples)\/|\.spec\.|\.map$/.test(file))).toEqual([]);
      expect(packed.files).toEqual(
        expect.arrayContaining([
          'package.json',
          'README.md',
          'dist/index.js',
          'dist/index.d.ts',
          'dist/cli/main.js',
          'dist/migrations/index.js',
        ]),
      );
    });

    it(
      'is what `npm run pack:lib` makes on a fresh checkout, which installs what the build needs first',
      async () => {
        expect(await freshPack).toEqual(packed.files);
      },
      STEP_TIMEOUT_MS,
    );

    it('names no path of the machine it was built on', async () => {
      const leaks: string[] = [];
      for (const file of packed.files) {
        const text = await readFile(path.join(packed.extracted, file), 'utf8');
        for (const absolute of [REPO_ROOT, os.homedir(), os.tmpdir()]) {
          if (text.includes(absolute)) leaks.push(`${file}: ${absolute}`);
        }
      }
      expect(leaks).toEqual([]);
    });

    it('declares every package its JavaScript requires, and points main, types, exports and bin at shipped files', async () => {
      const manifest = JSON.parse(await readFile(path.join(packed.extracted, 'package.json'), 'utf8'));
      const declared = new Set([...Object.keys(manifest.dependencies ?? {}), ...Object.keys(manifest.peerDependencies ?? {})]);
      const undeclared = new Set<string>();
      for (const file of packed.files.filter((name) => name.endsWith('.js'))) {
        const code = await readFile(path.join(packed.extracted, file), 'utf8');
        for (const [, specifier] of code.matchAll(/require\("([^"]+)"\)/g)) {
          if (specifier.startsWith('.')) {
            const target = path.posix.join(path.posix.dirname(file), specifier);
            if (!packed.files.includes(`${target}.js`) && !packed.files.includes(`${target}/index.js`))
              undeclared.add(`${file} -> ${specifier}`);
            continue;
          }
          const name = specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0];
          if (!builtinModules.includes(name.replace(/^node:/, '')) && !declared.has(name)) undeclared.add(name);
        }
      }
      expect([...undeclared]).toEqual([]);
      const subpaths = Object.entries(manifest.exports as Record<string, string | { types: string; default: string }>).filter(
        (entry): entry is [string, { types: string; default: string }] => typeof entry[1] === 'object',
      );
      expect(subpaths.map(([subpath]) => subpath)).toEqual([
        '.',
        './dashboard',
        './replay',
        './testing',
        './testing/global-setup',
        './testing/global-teardown',
      ]);
      const typesVersions = Object.values(manifest.typesVersions['*'] as Record<string, string[]>).flat();
      for (const target of [
        manifest.main,
        manifest.types,
        ...subpaths.flatMap(([, entry]) => [entry.types, entry.default]),
        ...typesVersions,
        manifest.bin.duraflow,
      ]) {
        expect(packed.files).toContain(target.replace(/^\.\//, ''));
      }
      expect(await readFile(path.join(packed.extracted, manifest.bin.duraflow), 'utf8')).toMatch(/^#!\/usr\/bin\/env node\n/);
      expect(manifest.peerDependenciesMeta).toEqual({
        '@nestjs/testing': { optional: true },
        '@opentelemetry/api': { optional: true },
        'class-transformer': { optional: true },
        'class-validator': { optional: true },
        ioredis: { optional: true },
        'prom-client': { optional: true },
      });
    });
  });

  describe(LOWEST.label, () => {
    it(
      'type-checks with tsc --strict against the shipped .d.ts',
      async () => {
        const app = await lowest;
        expect(app.typeErrors).toEqual([]);
      },
      STEP_TIMEOUT_MS,
    );

    it(
      'boots on a database of its own (migrationsRun) and runs a workflow to completed over HTTP',
      async () => {
        await expectOrderFulfilled(await lowest, await database());
      },
      STEP_TIMEOUT_MS,
    );

    it(
      'refuses to boot with the redis option but without ioredis, naming the package to install',
      async () => {
        const app = await lowest;
        const host = new HostAppProcess(app.dir, { DATABASE_URL: (await database()).url, REDIS_URL: SHARED_REDIS_URL });
        const exit = await host.exited;
        expect(exit.code).not.toBe(0);
        expect(host.log).toContain('needs "ioredis", which is not installed: run `npm install ioredis`');
      },
      STEP_TIMEOUT_MS,
    );

    it(
      'loads and runs workflows without class-validator and class-transformer, and refuses a DTO workflow naming them',
      async () => {
        const app = await lowest;
        await rm(path.join(app.dir, 'node_modules', 'class-validator'), { recursive: true });
        await rm(path.join(app.dir, 'node_modules', 'class-transformer'), { recursive: true });
        await cp(
          path.join(__dirname, 'fixtures', 'consumer', 'without-optional-peers.cjs'),
          path.join(app.dir, 'without-optional-peers.cjs'),
        );

        const result = await runOrThrow(process.execPath, ['without-optional-peers.cjs'], {
          cwd: app.dir,
          env: hostEnvironment({ DATABASE_URL: (await database()).url, NODE_ENV: 'production' }),
        });
        expect(JSON.parse(result.stdout.trim().split('\n').pop()!)).toEqual({
          plain: { status: 'completed', output: { greeting: 'hello ada' } },
          dto: {
            name: 'MissingDependencyError',
            code: 'MISSING_DEPENDENCY',
            message:
              'The "input" DTO of workflow "greet-dto" needs "class-validator" and "class-transformer", which are not installed: ' +
              'run `npm install class-validator class-transformer`.',
          },
        });
      },
      STEP_TIMEOUT_MS,
    );
  });

  describe('the newest majors (examples/host-app/package.json)', () => {
    it(
      'type-checks with tsc --strict against the shipped .d.ts',
      async () => {
        const app = await highest;
        expect(app.typeErrors).toEqual([]);
      },
      STEP_TIMEOUT_MS,
    );

    it(
      'boots on a database of its own (migrationsRun) and runs a workflow to completed over HTTP',
      async () => {
        await expectOrderFulfilled(await highest, await database());
      },
      STEP_TIMEOUT_MS,
    );

    it(
      'elects the reaper leader through Redis with REDIS_URL (ioredis installed)',
      async () => {
        const app = await highest;
        const leaderKey = `duraflow:test:host:${randomBytes(4).toString('hex')}`;
        const db = await database();
        const host = new HostAppProcess(app.dir, { DATABASE_URL: db.url, REDIS_URL: SHARED_REDIS_URL, DURAFLOW_LEADER_KEY: leaderKey });
        try {
          await host.ready;
          await waitForLog(host, /Reaper leader election: this node \(.+\) is the leader/);
          const status = await runOrThrow('npx', ['--no', 'duraflow', 'status', '--json', '--leader-key', leaderKey], {
            cwd: app.dir,
            env: hostEnvironment({ DATABASE_URL: db.url, REDIS_URL: SHARED_REDIS_URL }),
          });
          expect(JSON.parse(status.stdout).leader).toMatchObject({ via: 'redis', key: leaderKey, workerId: expect.any(String) });
        } finally {
          await host.stop();
        }
      },
      STEP_TIMEOUT_MS,
    );

    it(
      'gives the installed CLI: npx duraflow migrate and npx duraflow status',
      async () => {
        const app = await highest;
        const db = await database();
        const env = hostEnvironment({ DATABASE_URL: db.url });
        const migrate = await runOrThrow('npx', ['--no', 'duraflow', 'migrate'], { cwd: app.dir, env });
        expect(migrate.stdout).toMatch(new RegExp(`^Applied to .+: ${DURAFLOW_MIGRATION_NAMES.join(', ')}\n$`));
        const status = await runOrThrow('npx', ['--no', 'duraflow', 'status'], { cwd: app.dir, env });
        expect(status.stdout).toContain('Tasks: none');
        const unreachable = await run('npx', ['--no', 'duraflow', 'status', '--url', 'postgres://postgres@127.0.0.1:1/none'], {
          cwd: app.dir,
          env,
        });
        expect(unreachable.code).toBe(1);
        expect(unreachable.stderr.trim()).toMatch(
          /^duraflow: Cannot connect to PostgreSQL at 127\.0\.0\.1:1\/none: connect ECONNREFUSED[^\n]*$/,
        );
      },
      STEP_TIMEOUT_MS,
    );

    it(
      'also runs as an ES module app (a `nest new` default), on the same install',
      async () => {
        const installed = await highest;
        const esm = await prepareVariant(installed, 'esm', await highestFlavour(true));
        expect(esm.typeErrors).toEqual([]);
        expect(await readFile(path.join(esm.dir, 'dist', 'app.module.js'), 'utf8')).toMatch(
          /^import \{ Module \} from '@nestjs\/common';$/m,
        );
        await expectOrderFulfilled(esm, await database());
      },
      STEP_TIMEOUT_MS,
    );
  });

  describe.each(NEST_MAJORS)('the app `nest new` generates with @nestjs/cli %i, after the README', (major) => {
    it(
      'passes its own unit tests (npm test)',
      async () => {
        const { app, unit } = await generated.get(major)!;
        expect({ code: unit.code, counts: testCounts(unit.stdout + unit.stderr) }).toEqual({ code: 0, counts: { passed: 1, failed: 0 } });
        summary.push(
          `nest new (CLI ${major}) + \`${app.installLine}\` (${app.installed}; install ${seconds(app.installMs)}): npm test 1 passed`,
        );
      },
      STEP_TIMEOUT_MS,
    );

    it(
      "passes its own e2e tests and the README's, on a database of its own (npm run test:e2e)",
      async () => {
        const { e2e } = await generated.get(major)!;
        const output = e2e.stdout + e2e.stderr;
        if (e2e.code !== 0) throw new Error(`npm run test:e2e failed in the NestJS ${major} app:\n${output}`);
        expect(testCounts(output)).toEqual({ passed: 2, failed: 0 });
        summary.push(`nest new (CLI ${major}): npm run test:e2e 2 passed (the generated one and the README's greeting workflow)`);
      },
      STEP_TIMEOUT_MS,
    );

    it(
      "passes its own lint, the README's files included" + (major === 12 ? ', and builds' : ''),
      async () => {
        const { lint, build } = await generated.get(major)!;
        for (const result of [lint, build].filter((ran) => ran !== undefined)) {
          expect({ code: result.code, output: result.code === 0 ? '' : result.stdout + result.stderr }).toEqual({ code: 0, output: '' });
        }
      },
      STEP_TIMEOUT_MS,
    );
  });

  /**
   * Boots the host app, places an order over HTTP (the order and its task commit in one
   * transaction) and waits for the task to complete and the order to be shipped; then SIGTERM
   * stops it through Nest's shutdown hooks.
   */
  async function expectOrderFulfilled(app: PreparedHostApp, db: TestDatabase): Promise<void> {
    const operatorKey = randomBytes(12).toString('hex');
    const host = new HostAppProcess(app.dir, { DATABASE_URL: db.url, OPERATOR_KEY: operatorKey });
    let completedAt: number | undefined;
    try {
      const url = await host.ready;
      const placed = await fetch(`${url}/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ sku: 'DF-1', quantity: 2 }),
      });
      expect(placed.status).toBe(201);
      const { orderId, taskId } = (await placed.json()) as { orderId: number; taskId: string };

      type OrderState = { order: { status: string; taskId: string }; task: { status: string; output: unknown } };
      const state = await eventually(
        "the order's task has ended",
        async () => (await (await fetch(`${url}/orders/${orderId}`)).json()) as OrderState,
        {
          until: (read) => ['completed', 'failed', 'rolled_back', 'partial_rollback', 'cancelled'].includes(read.task.status),
          timeoutMs: 30_000,
          everyMs: 100,
        },
      );
      completedAt = Date.now();
      expect(state).toEqual({
        order: { id: orderId, sku: 'DF-1', quantity: 2, status: 'shipped', taskId },
        task: { id: taskId, status: 'completed', output: { reservationId: `reservation-${orderId}` }, error: null },
      });
      // The dashboard, mounted from the package's subpath, behind the host's guard.
      expect((await fetch(`${url}/duraflow/tasks/${taskId}`)).status).toBe(401);
      const page = await fetch(`${url}/duraflow/tasks/${taskId}`, { headers: { 'x-operator-key': operatorKey } });
      expect(page.status).toBe(200);
      expect(await page.text()).toContain(taskId);
      const { rows } = await db.client.query('SELECT name FROM migrations ORDER BY timestamp');
      expect(rows.map((row) => row.name)).toEqual([...DURAFLOW_MIGRATION_NAMES, 'CreateOrders1710000000000']);
      // The boot check has had its second: the host enabled shutdown hooks, so it stayed quiet.
      await sleep(2_000);
      expect(host.log).not.toContain('Shutdown hooks are not enabled');
    } finally {
      const exit = await host.stop('SIGTERM');
      expect(exit.signal === 'SIGTERM' || exit.code === 0).toBe(true);
    }
    expect(host.log).toMatch(/Worker \S+ stopped/);
    summary.push(
      app.installMs
        ? `${app.flavour.label} (${app.installed}): npm install of the tarball to a completed task in ${seconds(completedAt! - app.installStartedAt)} ` +
            `(install ${seconds(app.installMs)}, tsc ${seconds(app.compileMs)}; ${app.foreignTypeErrors} type errors inside other packages' .d.ts not ours)`
        : `${app.flavour.label} (${app.installed}), on the same install: tsc to a completed task in ${seconds(completedAt! - app.installStartedAt)}`,
    );
  }

  async function pack(into: string): Promise<Packed> {
    // prepack builds dist/ first, in a copy of the library: `npm start` (the engine's signal tests)
    // rebuilds libs/duraflow/dist meanwhile. The copy sits in the repository, so its build finds
    // the repository's node_modules as the library's own does.
    const copy = path.join(REPO_ROOT, '.test-build', `pack-${randomBytes(4).toString('hex')}`);
    await cp(LIBRARY_DIR, copy, { recursive: true, filter: (source) => !/[\\/](dist|node_modules)$/.test(source) });
    let stdout: string;
    try {
      ({ stdout } = await runOrThrow('npm', ['pack', '--json', '--pack-destination', into], { cwd: copy }));
    } finally {
      await rm(copy, { recursive: true, force: true });
    }
    const [info] = JSON.parse(stdout.slice(stdout.indexOf('[')));
    const tarball = path.join(into, info.filename);
    const extracted = path.join(into, 'tarball');
    await runOrThrow('mkdir', ['-p', extracted], { cwd: into });
    await runOrThrow('tar', ['xzf', tarball, '-C', extracted, '--strip-components=1'], { cwd: into });
    const files: string[] = info.files.map((file: { path: string }) => file.path).sort();
    expect((await listFiles(extracted)).sort()).toEqual(files);
    summary.push(
      `@duraflow/nestjs tarball: ${(info.size / 1024).toFixed(1)} kB packed, ${(info.unpackedSize / 1024).toFixed(1)} kB unpacked, ${files.length} files`,
    );
    return { tarball, size: info.size, unpackedSize: info.unpackedSize, files, extracted };
  }
});

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

/**
 * `npm run pack:lib` as on a fresh clone: the root's manifest and lockfile and the library's files,
 * without node_modules, outside the repository (so nothing resolves from its node_modules).
 * Returns the packed tarball's files.
 */
async function packFromFreshCheckout(dir: string): Promise<string[]> {
  const checkout = path.join(dir, 'checkout');
  await mkdir(path.join(checkout, 'libs'), { recursive: true });
  for (const file of ['package.json', 'package-lock.json']) await cp(path.join(REPO_ROOT, file), path.join(checkout, file));
  await cp(LIBRARY_DIR, path.join(checkout, 'libs', 'duraflow'), {
    recursive: true,
    filter: (source) => !/[\\/](dist|node_modules)$/.test(source),
  });
  const { stdout } = await runOrThrow('npm', ['run', '--silent', 'pack:lib', '--', '--json', '--pack-destination', dir], {
    cwd: checkout,
    env: hostEnvironment({ npm_config_prefer_offline: 'true' }),
  });
  const [info] = JSON.parse(stdout.slice(stdout.indexOf('[')));
  await rm(checkout, { recursive: true, force: true });
  return info.files.map((file: { path: string }) => file.path).sort();
}

async function listFiles(dir: string, prefix = ''): Promise<string[]> {
  const entries = await readdir(path.join(dir, prefix), { withFileTypes: true });
  const nested = await Promise.all(
    entries.map((entry) =>
      entry.isDirectory() ? listFiles(dir, path.posix.join(prefix, entry.name)) : [path.posix.join(prefix, entry.name)],
    ),
  );
  return nested.flat();
}

async function waitForLog(host: HostAppProcess, pattern: RegExp, timeoutMs = 30_000): Promise<void> {
  await eventually(`the host app logged ${pattern}`, () => pattern.test(host.log), { timeoutMs, everyMs: 50 }).catch((error: Error) => {
    throw new Error(`${error.message}:\n${host.log}`);
  });
}
