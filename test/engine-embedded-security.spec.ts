import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Client } from 'pg';
import { EngineProcess } from './fixtures/engine/engine-process';
import { stopLeftoverServers } from './fixtures/engine/embedded-cluster';
import { freePort } from './support/ports';

/**
 * Issue 21.1: the embedded PostgreSQL must not hand a superuser to every account of the
 * machine. Another system user (`nobody`) tries what the review did: log in over TCP with
 * the old fixed password (and run a program as the server's user), with none, and read the
 * password file. Only root can switch users; run elsewhere, the attempts come from the
 * test's own user, and the file's mode is checked instead of reading it as another user.
 */
jest.setTimeout(120_000);

const asRoot = process.getuid?.() === 0;
const BOOKING = { customer: 'ada', from: 'AMS', to: 'LIS' };

/** A login attempt as a small script of its own, so it can run as another system user. */
const LOGIN_SCRIPT = `
const { Client } = require(${JSON.stringify(dirname(require.resolve('pg/package.json')))});
const [port, password] = process.argv.slice(2);
const client = new Client({ host: '127.0.0.1', port: Number(port), user: 'postgres', database: 'postgres', password, connectionTimeoutMillis: 5000 });
client.connect()
  .then(async () => {
    await client.query("COPY (SELECT 1) TO PROGRAM 'id > /dev/null'");
    console.log(JSON.stringify({ connected: true }));
  }, (error) => console.log(JSON.stringify({ connected: false, code: error.code, message: error.message })))
  .finally(() => client.end().catch(() => undefined));
`;

describe('the embedded PostgreSQL against the other users of the machine', () => {
  let root: string;
  let dataDir: string;
  let script: string;
  const engines: EngineProcess[] = [];

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'duraflow-engine-security-'));
    chmodSync(root, 0o755); // the postgres and nobody users may enter it
    dataDir = join(root, 'data');
    script = join(root, 'login.js');
    writeFileSync(script, LOGIN_SCRIPT, { mode: 0o644 });
  });

  afterAll(async () => {
    for (const engine of engines) engine.kill('SIGKILL');
    await Promise.all(engines.map((engine) => engine.exited));
    stopLeftoverServers([dataDir]);
    rmSync(root, { recursive: true, force: true });
  });

  async function start(): Promise<{ engine: EngineProcess; httpUrl: string; port: number }> {
    const engine = new EngineProcess({
      DURAFLOW_DATA_DIR: dataDir,
      PORT: '0',
      GRPC_PORT: String(await freePort()),
      DURAFLOW_POLL_INTERVAL_MS: '50',
    });
    engines.push(engine);
    const httpUrl = await engine.ready;
    const port = Number(/on 127\.0\.0\.1:(\d+) \(data in/.exec(engine.log)![1]);
    return { engine, httpUrl, port };
  }

  /** A login as `nobody` (as this user when not root): `{ connected }`, with the error's SQLSTATE when refused. */
  function loginAsOtherUser(port: number, password: string): { connected: boolean; code?: string } {
    const command = asRoot ? ['runuser', '-u', 'nobody', '--', process.execPath] : [process.execPath];
    return JSON.parse(execFileSync(command[0], [...command.slice(1), script, String(port), password], { encoding: 'utf8' }));
  }

  function otherUserReads(file: string): boolean {
    if (!asRoot) return (statSync(file).mode & 0o077) !== 0;
    try {
      execFileSync('runuser', ['-u', 'nobody', '--', 'cat', file], { stdio: 'pipe' });
      return true;
    } catch {
      return false;
    }
  }

  const passwordFile = () => join(dataDir, 'postgres.password');
  const password = () => readFileSync(passwordFile(), 'utf8').trim();

  /** A login with the password from the file, as the engine does: the control that shows the script can connect. */
  async function loginWithFile(port: number, sql?: string): Promise<void> {
    const client = new Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres', password: password() });
    await client.connect();
    try {
      if (sql) await client.query(sql);
    } finally {
      await client.end();
    }
  }

  it('gives a new cluster a random password in a 0600 file: another user can neither log in nor read it', async () => {
    const { engine, httpUrl, port } = await start();
    expect(statSync(passwordFile()).mode & 0o777).toBe(0o600);
    expect(password()).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(otherUserReads(passwordFile())).toBe(false);

    expect(loginAsOtherUser(port, 'duraflow')).toEqual({
      connected: false,
      code: '28P01',
      message: expect.stringMatching(/password authentication failed for user "postgres"/),
    });
    expect(loginAsOtherUser(port, '')).toMatchObject({ connected: false });
    expect(loginAsOtherUser(port, 'postgres')).toMatchObject({ connected: false, code: '28P01' });
    // The same script with the password works: the refusals above are the server's.
    expect(loginAsOtherUser(port, password())).toEqual({ connected: true });

    const task = await fetch(`${httpUrl}/tasks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ workflowName: 'booking', input: BOOKING }),
    });
    expect(task.status).toBe(201);
    expect((await engine.stop()).code).toBe(0);
  });

  it('gives a cluster made with the old fixed password a random one on start, keeping its data', async () => {
    // An old cluster: the password every earlier engine used, and no password file.
    const { engine, port } = await start();
    await loginWithFile(port, `ALTER ROLE postgres PASSWORD 'duraflow'`);
    expect(loginAsOtherUser(port, 'duraflow')).toEqual({ connected: true });
    expect((await engine.stop()).code).toBe(0);
    unlinkSync(passwordFile());

    const migrated = await start();
    expect(migrated.engine.log).toMatch(
      /was created with the fixed password "duraflow", which any user of this machine could use: giving it a random password/,
    );
    expect(migrated.engine.log).toContain(`The embedded PostgreSQL cluster's new password is in ${passwordFile()} (mode 0600)`);
    expect(statSync(passwordFile()).mode & 0o777).toBe(0o600);
    expect(loginAsOtherUser(migrated.port, 'duraflow')).toMatchObject({ connected: false, code: '28P01' });
    const tasks: any = await (await fetch(`${migrated.httpUrl}/tasks`)).json();
    expect(tasks.items.length).toBeGreaterThan(0);
    expect((await migrated.engine.stop()).code).toBe(0);
  });

  it('refuses, saying what to do, a cluster without a password file whose password is neither the old one nor known', async () => {
    const { engine, port } = await start();
    await loginWithFile(port, `ALTER ROLE postgres PASSWORD 'set-by-hand'`);
    expect((await engine.stop()).code).toBe(0);
    unlinkSync(passwordFile());

    const refused = new EngineProcess({ DURAFLOW_DATA_DIR: dataDir, PORT: '0', GRPC_PORT: String(await freePort()) });
    engines.push(refused);
    expect((await refused.exited).code).toBe(1);
    expect(refused.log).toContain(`does not take the password "duraflow" that earlier engines gave it`);
    expect(refused.log).toContain(`write it to ${passwordFile()} (mode 0600)`);
    expect(refused.log).not.toMatch(/\n\s+at /);

    // Told the password, it starts.
    writeFileSync(passwordFile(), 'set-by-hand\n', { mode: 0o600 });
    const told = await start();
    expect((await told.engine.stop()).code).toBe(0);
  });
});
