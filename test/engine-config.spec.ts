import { resolve } from 'node:path';
import { DuraflowModuleOptions, WorkerService } from '@duraflow/nestjs';
import { DURAFLOW_MODULE_OPTIONS } from '@duraflow/nestjs/config/duraflow.module-definition';
import { EngineConfigError, loadEngineConfig } from '../src/config/engine.config';
import { http, startTestEngine } from './fixtures/engine/engine-app';
import { EngineProcess } from './fixtures/engine/engine-process';
import { PgBouncer } from './support/pgbouncer';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

const bed = useTestBed();
const BOOKING = { customer: 'ada', from: 'AMS', to: 'LIS' };

describe('the engine configuration (environment variables)', () => {
  it('reads DURAFLOW_PREFETCH as auto (any case) or a whole number', () => {
    expect(loadEngineConfig({ DURAFLOW_PREFETCH: 'AUTO' }).prefetch).toBe('auto');
    expect(loadEngineConfig({ DURAFLOW_PREFETCH: '0' }).prefetch).toBe(0);
  });

  it('has a default for every setting, and no database URL: the embedded database', () => {
    expect(loadEngineConfig({})).toEqual({
      port: 3000,
      grpcPort: 50051,
      host: '127.0.0.1',
      databaseUrl: undefined,
      dataDir: resolve('.duraflow'),
      embeddedDatabasePort: 0,
      redisUrl: undefined,
      apiKey: undefined,
      allowedHosts: [],
      trustProxy: false,
      dashboardSession: { idleMs: 30 * 60_000, maxMs: 12 * 3_600_000 },
      http: true,
      worker: true,
      nodeId: undefined,
      migrate: true,
      concurrency: 100,
      maxInputBytes: 1_048_576,
      shutdownTimeoutMs: 10_000,
      prefetch: 'auto',
      pollIntervalMs: 500,
      heartbeatIntervalMs: 5_000,
      reaperIntervalMs: 10_000,
      staleAfterMs: 30_000,
      maxIdlePollIntervalMs: 30_000,
      leaseConfirmAfterMs: 10_000,
      pooler: 'none',
      listenUrl: undefined,
      retention: {
        completed: undefined,
        failed: undefined,
        rolledBack: undefined,
        cancelled: undefined,
        batchSize: 500,
        intervalMs: 60_000,
      },
    });
  });

  it('reads every variable, with typed values', () => {
    const config = loadEngineConfig({
      PORT: '8080',
      GRPC_PORT: '9090',
      HOST: '10.0.0.5',
      DATABASE_URL: 'postgresql://app:secret@db.internal:5432/duraflow',
      DURAFLOW_DATA_DIR: '/var/lib/duraflow',
      DURAFLOW_EMBEDDED_DB_PORT: '5433',
      REDIS_URL: 'redis://cache:6379/2',
      DURAFLOW_API_KEY: ' s3cret ',
      DURAFLOW_ALLOWED_HOSTS: 'Engine.internal,ops.example.com:8443',
      DURAFLOW_TRUST_PROXY: '10.0.0.0/8, loopback',
      DURAFLOW_DASHBOARD_SESSION_IDLE: '15m',
      DURAFLOW_DASHBOARD_SESSION_MAX: '1d',
      DURAFLOW_HTTP: 'FALSE',
      DURAFLOW_WORKER: 'yes',
      DURAFLOW_NODE_ID: 'duraflow-engine-2',
      DURAFLOW_MIGRATE: '0',
      DURAFLOW_CONCURRENCY: '25',
      DURAFLOW_MAX_INPUT_BYTES: '2048',
      DURAFLOW_SHUTDOWN_TIMEOUT_MS: '0',
      DURAFLOW_PREFETCH: '5',
      DURAFLOW_POLL_INTERVAL_MS: '250',
      DURAFLOW_HEARTBEAT_INTERVAL_MS: '1000',
      DURAFLOW_REAPER_INTERVAL_MS: '2000',
      DURAFLOW_STALE_AFTER_MS: '6000',
      DURAFLOW_MAX_IDLE_POLL_INTERVAL_MS: '5000',
      DURAFLOW_LEASE_CONFIRM_AFTER_MS: '0',
      DURAFLOW_POOLER: 'PgBouncer-Transaction',
      DURAFLOW_LISTEN_URL: 'postgres://app:secret@db-direct.internal:5432/duraflow',
      DURAFLOW_RETENTION_COMPLETED: '7d',
      DURAFLOW_RETENTION_FAILED: '12h',
      DURAFLOW_RETENTION_ROLLED_BACK: '30m',
      DURAFLOW_RETENTION_CANCELLED: '45 s',
      DURAFLOW_RETENTION_BATCH_SIZE: '100',
      DURAFLOW_RETENTION_INTERVAL_MS: '15000',
      DURAFLOW_CALLBACK_BASE_URL: 'https://hooks.example.com',
      DURAFLOW_CALLBACK_SECRET: 'a-callback-secret-of-more-than-32-bytes',
      DURAFLOW_CALLBACK_PATH: '/hooks/duraflow/',
    });
    expect(config).toEqual({
      port: 8080,
      grpcPort: 9090,
      host: '10.0.0.5',
      databaseUrl: 'postgresql://app:secret@db.internal:5432/duraflow',
      dataDir: '/var/lib/duraflow',
      embeddedDatabasePort: 5433,
      redisUrl: 'redis://cache:6379/2',
      apiKey: 's3cret',
      allowedHosts: ['engine.internal', 'ops.example.com:8443'],
      trustProxy: ['10.0.0.0/8', 'loopback'],
      dashboardSession: { idleMs: 15 * 60_000, maxMs: 86_400_000 },
      http: false,
      worker: true,
      nodeId: 'duraflow-engine-2',
      migrate: false,
      concurrency: 25,
      maxInputBytes: 2048,
      shutdownTimeoutMs: 0,
      prefetch: 5,
      pollIntervalMs: 250,
      heartbeatIntervalMs: 1000,
      reaperIntervalMs: 2000,
      staleAfterMs: 6000,
      maxIdlePollIntervalMs: 5000,
      leaseConfirmAfterMs: 0,
      pooler: 'pgbouncer-transaction',
      listenUrl: 'postgres://app:secret@db-direct.internal:5432/duraflow',
      retention: {
        completed: 7 * 86_400_000,
        failed: 12 * 3_600_000,
        rolledBack: 30 * 60_000,
        cancelled: 45_000,
        batchSize: 100,
        intervalMs: 15_000,
      },
      callbacks: { baseUrl: 'https://hooks.example.com', secret: 'a-callback-secret-of-more-than-32-bytes', path: '/hooks/duraflow' },
    });
  });

  it('takes the callback variables together, a secret of 32 bytes or more, and never prints the secret', () => {
    const secret = 'short-secret';
    expect(() => loadEngineConfig({ DURAFLOW_CALLBACK_SECRET: 'x'.repeat(40) })).toThrow(/DURAFLOW_CALLBACK_BASE_URL/);
    expect(() => loadEngineConfig({ DURAFLOW_CALLBACK_BASE_URL: 'https://hooks.example.com' })).toThrow(/DURAFLOW_CALLBACK_SECRET/);
    const error = (() => {
      try {
        loadEngineConfig({ DURAFLOW_CALLBACK_BASE_URL: 'https://hooks.example.com', DURAFLOW_CALLBACK_SECRET: secret });
      } catch (thrown) {
        return thrown as Error;
      }
    })();
    expect(error?.message).toMatch(/DURAFLOW_CALLBACK_SECRET.*at least 32 bytes/);
    expect(error?.message).not.toContain(secret);
    expect(() => loadEngineConfig({ DURAFLOW_CALLBACK_BASE_URL: 'ftp://x', DURAFLOW_CALLBACK_SECRET: 'x'.repeat(40) })).toThrow(/http/);
    expect(() =>
      loadEngineConfig({
        DURAFLOW_CALLBACK_BASE_URL: 'https://x',
        DURAFLOW_CALLBACK_SECRET: 'x'.repeat(40),
        DURAFLOW_CALLBACK_PATH: '/a/:b',
      }),
    ).toThrow(/DURAFLOW_CALLBACK_PATH/);
    expect(loadEngineConfig({}).callbacks).toBeUndefined();
  });

  it('reads a retention in ms, s, m, h or d, any case; 0 removes a finished task at its next sweep', () => {
    expect(loadEngineConfig({ DURAFLOW_RETENTION_COMPLETED: '1500ms' }).retention.completed).toBe(1_500);
    expect(loadEngineConfig({ DURAFLOW_RETENTION_COMPLETED: '2D' }).retention.completed).toBe(172_800_000);
    expect(loadEngineConfig({ DURAFLOW_RETENTION_FAILED: '0s' }).retention.failed).toBe(0);
    expect(loadEngineConfig({ DURAFLOW_RETENTION_CANCELLED: '36500d' }).retention.cancelled).toBe(36_500 * 86_400_000);
  });

  it('confirms leases after a third of the stale limit unless DURAFLOW_LEASE_CONFIRM_AFTER_MS says otherwise', () => {
    expect(loadEngineConfig({ DURAFLOW_STALE_AFTER_MS: '9000' }).leaseConfirmAfterMs).toBe(3000);
    expect(loadEngineConfig({ DURAFLOW_STALE_AFTER_MS: '9000', DURAFLOW_LEASE_CONFIRM_AFTER_MS: '8999' }).leaseConfirmAfterMs).toBe(8999);
  });

  it('binds to loopback without an API key and to every interface with one, unless HOST says otherwise', () => {
    expect(loadEngineConfig({}).host).toBe('127.0.0.1');
    expect(loadEngineConfig({ DURAFLOW_API_KEY: 'k' }).host).toBe('0.0.0.0');
    expect(loadEngineConfig({ DURAFLOW_API_KEY: 'k', HOST: '127.0.0.1' }).host).toBe('127.0.0.1');
    expect(loadEngineConfig({ HOST: '[::]' }).host).toBe('::');
    expect(loadEngineConfig({ HOST: 'localhost' }).host).toBe('localhost');
  });

  it('treats an empty variable as unset', () => {
    expect(loadEngineConfig({ PORT: '', DATABASE_URL: ' ', DURAFLOW_API_KEY: '' })).toMatchObject({
      port: 3000,
      databaseUrl: undefined,
      apiKey: undefined,
    });
  });

  it.each([
    ['PORT', 'http', /an integer from 0 to 65535/],
    ['PORT', '70000', /an integer from 0 to 65535/],
    ['GRPC_PORT', '0', /an integer from 1 to 65535/],
    ['GRPC_PORT', '50051.5', /an integer/],
    ['HOST', 'http://0.0.0.0', /an IP address \(127\.0\.0\.1, 0\.0\.0\.0, ::\) or a host name/],
    ['HOST', '0.0.0.0:3000', /an IP address/],
    ['DURAFLOW_TRUST_PROXY', 'everyone', /a number of proxies, or their addresses/],
    ['DURAFLOW_DASHBOARD_SESSION_IDLE', '30', /from 1s to 30d/],
    ['DURAFLOW_DASHBOARD_SESSION_MAX', '31d', /from 1s to 30d/],
    ['DURAFLOW_MAX_INPUT_BYTES', '0', /an integer from 1 to 268435456/],
    ['DURAFLOW_SHUTDOWN_TIMEOUT_MS', '-1', /an integer from 0/],
    ['DATABASE_URL', 'mysql://localhost/db', /a URL starting with postgres:\/\/ or postgresql:\/\//],
    ['DATABASE_URL', 'not a url', /a URL starting with postgres:/],
    ['DURAFLOW_EMBEDDED_DB_PORT', '-1', /an integer from 0 to 65535/],
    ['REDIS_URL', 'localhost:6379', /a URL starting with redis:\/\/ or rediss:\/\//],
    ['DURAFLOW_HTTP', 'maybe', /true or false/],
    ['DURAFLOW_WORKER', '2', /true or false/],
    ['DURAFLOW_MIGRATE', 'sometimes', /true or false/],
    ['DURAFLOW_CONCURRENCY', '0', /an integer from 1 to 10000/],
    ['DURAFLOW_CONCURRENCY', 'ten', /an integer/],
    ['DURAFLOW_PREFETCH', 'lots', /auto or an integer from 0 to 10000/],
    ['DURAFLOW_PREFETCH', '-1', /auto or an integer/],
    ['DURAFLOW_POLL_INTERVAL_MS', '1e3', /an integer/],
    ['DURAFLOW_HEARTBEAT_INTERVAL_MS', '0', /an integer from 1/],
    ['DURAFLOW_REAPER_INTERVAL_MS', '-5', /an integer from 1/],
    ['DURAFLOW_STALE_AFTER_MS', 'soon', /an integer/],
    ['DURAFLOW_MAX_IDLE_POLL_INTERVAL_MS', '0', /an integer from 1 to 86400000/],
    ['DURAFLOW_MAX_IDLE_POLL_INTERVAL_MS', '30s', /an integer/],
    ['DURAFLOW_LEASE_CONFIRM_AFTER_MS', '-1', /an integer from 0/],
    ['DURAFLOW_LEASE_CONFIRM_AFTER_MS', '30000', /less than DURAFLOW_STALE_AFTER_MS \(30000\)/],
    ['DURAFLOW_POOLER', 'pgbouncer', /none or pgbouncer-transaction/],
    ['DURAFLOW_POOLER', 'pgbouncer-session', /none or pgbouncer-transaction/],
    ['DURAFLOW_LISTEN_URL', 'db-direct:5432', /a URL starting with postgres:\/\/ or postgresql:\/\//],
    [
      'DURAFLOW_RETENTION_COMPLETED',
      '7',
      /a whole number with a unit, ms, s, m, h or d \(e\.g\. 7d, 12h, 30m\), up to 36500d; unset keeps these tasks forever/,
    ],
    ['DURAFLOW_RETENTION_FAILED', '1w', /a whole number with a unit/],
    ['DURAFLOW_RETENTION_ROLLED_BACK', '1.5d', /a whole number with a unit/],
    ['DURAFLOW_RETENTION_CANCELLED', '-1d', /a whole number with a unit/],
    ['DURAFLOW_RETENTION_COMPLETED', '36501d', /up to 36500d/],
    ['DURAFLOW_RETENTION_COMPLETED', 'forever', /unset keeps these tasks forever/],
    ['DURAFLOW_RETENTION_BATCH_SIZE', '0', /an integer from 1 to 100000/],
    ['DURAFLOW_RETENTION_INTERVAL_MS', '1m', /an integer from 1/],
    ['DURAFLOW_NODE_ID', 'web 0', /up to 200 printable characters without spaces/],
    ['DURAFLOW_NODE_ID', 'w'.repeat(201), /up to 200 printable characters/],
  ])('refuses %s=%j, naming the variable', (variable, value, expected) => {
    const attempt = () => loadEngineConfig({ [variable]: value });
    expect(attempt).toThrow(EngineConfigError);
    expect(attempt).toThrow(
      new RegExp(`^Environment variable ${variable}=${JSON.stringify(value).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is invalid`),
    );
    expect(attempt).toThrow(expected);
  });

  it('does not print the password of a refused URL', () => {
    expect(() => loadEngineConfig({ DATABASE_URL: 'mysql://app:hunter2@db/app' })).toThrow(
      'Environment variable DATABASE_URL="mysql://app:***@db/app" is invalid',
    );
  });

  it('refuses a stale limit that the heartbeat cannot beat, naming both variables', () => {
    expect(() => loadEngineConfig({ DURAFLOW_HEARTBEAT_INTERVAL_MS: '5000', DURAFLOW_STALE_AFTER_MS: '5000' })).toThrow(
      /DURAFLOW_STALE_AFTER_MS="5000" is invalid: expected more than DURAFLOW_HEARTBEAT_INTERVAL_MS \(5000\)/,
    );
  });

  it('refuses a lease confirmed no sooner than the stale limit it must beat, naming both variables', () => {
    expect(() => loadEngineConfig({ DURAFLOW_STALE_AFTER_MS: '6000', DURAFLOW_LEASE_CONFIRM_AFTER_MS: '7000' })).toThrow(
      /DURAFLOW_LEASE_CONFIRM_AFTER_MS="7000" is invalid: expected less than DURAFLOW_STALE_AFTER_MS \(6000\)/,
    );
  });

  it('refuses a pooler or a listen URL for the embedded database, without printing the password', () => {
    expect(() => loadEngineConfig({ DURAFLOW_POOLER: 'pgbouncer-transaction' })).toThrow(
      /DURAFLOW_POOLER="pgbouncer-transaction" is invalid: expected none without DATABASE_URL/,
    );
    expect(() => loadEngineConfig({ DURAFLOW_LISTEN_URL: 'postgres://app:hunter2@db/app' })).toThrow(
      'Environment variable DURAFLOW_LISTEN_URL="postgres://app:***@db/app" is invalid: expected unset without DATABASE_URL',
    );
    expect(loadEngineConfig({ DATABASE_URL: 'postgres://db/app', DURAFLOW_POOLER: 'none' }).pooler).toBe('none');
  });

  it('refuses a node id behind a transaction-mode pooler without a direct DURAFLOW_LISTEN_URL for its lock', () => {
    const behindPooler = { DATABASE_URL: 'postgres://pgbouncer/app', DURAFLOW_POOLER: 'pgbouncer-transaction', DURAFLOW_NODE_ID: 'web-0' };
    expect(() => loadEngineConfig(behindPooler)).toThrow(
      /DURAFLOW_NODE_ID="web-0" is invalid: expected unset behind a transaction-mode pooler/,
    );
    expect(loadEngineConfig({ ...behindPooler, DURAFLOW_LISTEN_URL: 'postgres://db/app' }).nodeId).toBe('web-0');
  });

  it('refuses a node with neither the API nor a worker', () => {
    expect(() => loadEngineConfig({ DURAFLOW_HTTP: 'false', DURAFLOW_WORKER: 'false' })).toThrow(
      /DURAFLOW_HTTP="false" is invalid: expected true while DURAFLOW_WORKER is false/,
    );
  });

  it('stops `npm start` with exit code 1 and a message naming the bad variable', async () => {
    const engine = new EngineProcess({ DURAFLOW_CONCURRENCY: 'lots' });
    expect((await engine.exited).code).toBe(1);
    expect(engine.log).toMatch(
      /ERROR \[Engine\] Environment variable DURAFLOW_CONCURRENCY="lots" is invalid: expected an integer from 1 to 10000\./,
    );
    expect(engine.log).not.toMatch(/\n\s+at /);
  });
});

describe('the engine with the scale settings from the environment', () => {
  it('hands the idle backoff, the lease confirmation and the retention to the library', async () => {
    const engine = await startTestEngine(bed, {
      DURAFLOW_MAX_IDLE_POLL_INTERVAL_MS: '4000',
      DURAFLOW_LEASE_CONFIRM_AFTER_MS: '2500',
      DURAFLOW_RETENTION_FAILED: '3d',
      DURAFLOW_RETENTION_BATCH_SIZE: '50',
    });
    const options = engine.app.get<DuraflowModuleOptions>(DURAFLOW_MODULE_OPTIONS);
    expect(options).toMatchObject({
      pooler: 'none',
      worker: { maxIdlePollIntervalMs: 4000, leaseConfirmAfterMs: 2500 },
      retention: { failed: 259_200_000, batchSize: 50, intervalMs: 60_000 },
    });
    expect(options.retention?.completed).toBeUndefined();
    expect(options.listenUrl).toBeUndefined();
    expect(options.worker?.nodeId).toBeUndefined();
    await bed.close(engine);
  });

  it('runs its worker as the node DURAFLOW_NODE_ID: the worker id names the node, and the node holds its lock', async () => {
    const engine = await startTestEngine(bed, { DURAFLOW_NODE_ID: 'engine-node-0' });
    expect(engine.app.get<DuraflowModuleOptions>(DURAFLOW_MODULE_OPTIONS).worker?.nodeId).toBe('engine-node-0');
    const workerId = engine.app.get(WorkerService).workerId;
    expect(workerId).toMatch(/^engine-node-0#[0-9a-f]{8}$/);
    const { rows } = await bed.db.client.query(
      `SELECT count(*)::int AS sessions FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`,
      [`duraflow-node ${workerId}`],
    );
    expect(rows[0].sessions).toBe(1);
    await bed.close(engine);
  });

  it('removes a completed task and its step runs after DURAFLOW_RETENTION_COMPLETED, and keeps the rolled back one', async () => {
    const engine = await startTestEngine(bed, {
      DURAFLOW_RETENTION_COMPLETED: '0s',
      DURAFLOW_RETENTION_INTERVAL_MS: '100',
      DURAFLOW_REAPER_INTERVAL_MS: '100',
    });
    const completed = await http(engine, 'POST', '/tasks', { body: { workflowName: 'booking', input: BOOKING } });
    const rolledBack = await http(engine, 'POST', '/tasks', {
      body: { workflowName: 'booking', input: { ...BOOKING, failAt: 'hotel' } },
    });
    expect([completed.status, rolledBack.status]).toEqual([201, 201]);
    await eventually('the rolled back booking has ended', () => bed.rows.task(rolledBack.body.id), {
      until: (task) => task.status === 'rolled_back',
    });
    await eventually('the completed booking is removed', () => bed.rows.count('agent_tasks', 'id = $1', [completed.body.id]), {
      until: (count) => count === 0,
    });
    expect(await bed.rows.count('step_runs', 'task_id = $1', [completed.body.id])).toBe(0);
    expect((await bed.rows.task(rolledBack.body.id)).status).toBe('rolled_back');
    expect(await bed.rows.count('step_runs', 'task_id = $1', [rolledBack.body.id])).toBeGreaterThan(0);
    expect((await http(engine, 'GET', `/tasks/${completed.body.id}`)).status).toBe(404);
    await bed.close(engine);
  });

  it('runs a booking through pgbouncer in transaction mode with DURAFLOW_POOLER and LISTEN on DURAFLOW_LISTEN_URL', async () => {
    const bouncer = bed.closeLater(await PgBouncer.start({ poolSize: 2 }), (pooler) => pooler.stop());
    const engine = await startTestEngine(
      bed,
      { DURAFLOW_POOLER: 'pgbouncer-transaction', DURAFLOW_LISTEN_URL: bed.db.url },
      { databaseUrl: bouncer.url(bed.db.name) },
    );
    expect(engine.app.get<DuraflowModuleOptions>(DURAFLOW_MODULE_OPTIONS)).toMatchObject({
      pooler: 'pgbouncer-transaction',
      listenUrl: bed.db.url,
    });
    const created = await http(engine, 'POST', '/tasks', { body: { workflowName: 'booking', input: BOOKING } });
    expect(created.status).toBe(201);
    const done = await eventually('the booking has ended', async () => (await http(engine, 'GET', `/tasks/${created.body.id}`)).body, {
      until: (task) => !['pending', 'running'].includes(task.status),
    });
    expect(done).toMatchObject({ status: 'completed', output: { flight: 'flight-ada-AMS-LIS' } });
    expect(await bed.rows.completedStepKeys(created.body.id)).toEqual(['book-flight', 'book-hotel', 'book-car']);
    // LISTEN goes past the pooler: a session on the direct connection listens.
    const listening = () =>
      bed.db.client
        .query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND query ILIKE 'LISTEN%'`, [bed.db.name])
        .then(({ rows }) => rows[0].n);
    expect(await eventually('a session LISTENs', listening, { until: (n) => n > 0 })).toBeGreaterThan(0);
  });
});
