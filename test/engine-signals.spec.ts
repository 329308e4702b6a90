import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EngineProcess } from './fixtures/engine/engine-process';
import { postmasterPid } from './fixtures/engine/embedded-cluster';
import { isAlive } from './support/process-alive';
import { http } from './fixtures/engine/engine-app';
import { eventually } from './support/waiting';
import { freePort, TakenPort, takePort } from './support/ports';

/**
 * The engine as a person runs it: `npm start` in a terminal (Ctrl-C), under a supervisor
 * (SIGTERM to npm), and on ports that are taken. Each `npm start` builds the app first.
 */
jest.setTimeout(180_000);

const SLOW_BOOKING = { customer: 'ada', from: 'AMS', to: 'LIS', legMs: 600_000 };

/** Both processes exited (or the last word on them after the bound). */
const exited = (...pids: number[]) =>
  eventually('both processes have exited', async () => pids.filter(isAlive), { until: (alive) => alive.length === 0 });

describe('the engine under npm start', () => {
  let root: string;
  let dataDir: string;
  const engines: EngineProcess[] = [];
  const pids = new Set<number>();

  /** The engine's own pid (npm's child) and its PostgreSQL's, from the files they hold in the data directory. */
  function enginePids(): { node: number; postgres: number } {
    const node = JSON.parse(readFileSync(join(dataDir, 'engine.lock'), 'utf8')).pid as number;
    const postgres = postmasterPid(dataDir)!;
    pids.add(node).add(postgres);
    return { node, postgres };
  }

  async function npmStart(env: Record<string, string> = {}): Promise<EngineProcess> {
    const engine = new EngineProcess(
      {
        DURAFLOW_DATA_DIR: dataDir,
        PORT: '0',
        GRPC_PORT: String(await freePort()),
        DURAFLOW_POLL_INTERVAL_MS: '50',
        DURAFLOW_SHUTDOWN_TIMEOUT_MS: '200',
        ...env,
      },
      { npmStart: true, ownProcessGroup: true },
    );
    engines.push(engine);
    return engine;
  }

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'duraflow-engine-signals-'));
    chmodSync(root, 0o755); // the `postgres` user runs the server when the tests run as root
    dataDir = join(root, 'data');
  });

  afterAll(async () => {
    for (const engine of engines) engine.kill('SIGKILL');
    for (const pid of pids) if (isAlive(pid)) process.kill(pid, 'SIGKILL');
    rmSync(root, { recursive: true, force: true });
  });

  it('stops gracefully on Ctrl-C: the running task is handed back through a database the terminal did not stop', async () => {
    const engine = await npmStart();
    const api = { httpUrl: await engine.ready };
    const { node, postgres } = enginePids();
    const task = (await http(api, 'POST', '/tasks', { body: { workflowName: 'booking', input: SLOW_BOOKING } })).body;
    await eventually('the task runs', async () => (await http(api, 'GET', `/tasks/${task.id}`)).body.status, {
      until: (status) => status === 'running',
    });

    engine.interrupt(); // npm and the engine get SIGINT from the "terminal", and npm forwards its own
    expect(await engine.exited).toEqual({ code: 0, signal: null });
    expect(engine.log).toMatch(/SIGINT: shutting down/);
    expect(engine.log).toMatch(/Handed 1 unfinished task\(s\) back to pending/);
    expect(engine.log).toMatch(/Embedded PostgreSQL stopped/);
    expect(engine.log).not.toMatch(/exiting now|ECONNREFUSED|Could not hand tasks back|had already stopped/);
    await exited(node, postgres);
    expect(existsSync(join(dataDir, 'engine.lock'))).toBe(false);

    // After a restart the task is pending (not a stale `running` left to the reaper), with no retry counted.
    const observer = await npmStart({ DURAFLOW_WORKER: 'false' });
    const observed = await http({ httpUrl: await observer.ready }, 'GET', `/tasks/${task.id}`);
    expect(observed.body).toMatchObject({ status: 'pending', workerId: null, retryCount: 0 });
    observer.interrupt();
    expect((await observer.exited).code).toBe(0);
  });

  it('stops on SIGTERM to the npm process, leaving no engine or PostgreSQL running', async () => {
    const engine = await npmStart();
    await engine.ready;
    const { node, postgres } = enginePids();
    expect([isAlive(node), isAlive(postgres)]).toEqual([true, true]);

    engine.kill('SIGTERM'); // to npm only, as a supervisor or `kill <pid>` does
    await engine.exited;
    await exited(node, postgres);
    expect(engine.log).toMatch(/SIGTERM: shutting down/);
    expect(engine.log).toMatch(/Embedded PostgreSQL stopped/);
  });
});

describe('a port that is taken', () => {
  let taken: TakenPort;
  let port: number;
  let root: string;

  beforeAll(async () => {
    taken = await takePort();
    port = taken.port;
    root = mkdtempSync(join(tmpdir(), 'duraflow-engine-ports-'));
  });
  afterAll(() => {
    taken.release();
    rmSync(root, { recursive: true, force: true });
  });

  it.each(['PORT', 'GRPC_PORT'])('stops the start before the database starts, naming %s', async (variable) => {
    const engine = new EngineProcess({
      DURAFLOW_DATA_DIR: join(root, variable),
      PORT: '0',
      GRPC_PORT: String(await freePort()),
      [variable]: String(port),
    });
    expect((await engine.exited).code).toBe(1);
    expect(engine.log).toContain(
      `${variable}=${port}: 127.0.0.1:${port} is already in use (another engine or program listens there). Stop it, or set ${variable} to a free port.`,
    );
    expect(engine.log).not.toMatch(/PostgreSQL|\n\s+at /);
    expect(existsSync(join(root, variable))).toBe(false);
  });

  it('stops the start before the database starts when HOST is not an address of this machine', async () => {
    // 192.0.2.0/24 is reserved for documentation: no machine has it.
    const engine = new EngineProcess({
      DURAFLOW_DATA_DIR: join(root, 'host'),
      HOST: '192.0.2.1',
      PORT: '0',
      GRPC_PORT: String(await freePort()),
    });
    expect((await engine.exited).code).toBe(1);
    expect(engine.log).toContain(
      'HOST=192.0.2.1 is not an address of this machine. Set HOST to one of its addresses, 127.0.0.1 (this machine only) or 0.0.0.0 (every interface).',
    );
    expect(engine.log).not.toMatch(/PostgreSQL|\n\s+at /);
  });
});
