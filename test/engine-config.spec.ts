import { resolve } from 'node:path';
import { EngineConfigError, loadEngineConfig } from '../src/config/engine.config';
import { EngineProcess } from './fixtures/engine/engine-process';

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
      http: true,
      worker: true,
      migrate: true,
      concurrency: 10,
      maxInputBytes: 1_048_576,
      shutdownTimeoutMs: 10_000,
      prefetch: 'auto',
      pollIntervalMs: 500,
      heartbeatIntervalMs: 5_000,
      reaperIntervalMs: 10_000,
      staleAfterMs: 30_000,
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
      DURAFLOW_HTTP: 'FALSE',
      DURAFLOW_WORKER: 'yes',
      DURAFLOW_MIGRATE: '0',
      DURAFLOW_CONCURRENCY: '25',
      DURAFLOW_MAX_INPUT_BYTES: '2048',
      DURAFLOW_SHUTDOWN_TIMEOUT_MS: '0',
      DURAFLOW_PREFETCH: '5',
      DURAFLOW_POLL_INTERVAL_MS: '250',
      DURAFLOW_HEARTBEAT_INTERVAL_MS: '1000',
      DURAFLOW_REAPER_INTERVAL_MS: '2000',
      DURAFLOW_STALE_AFTER_MS: '6000',
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
      http: false,
      worker: true,
      migrate: false,
      concurrency: 25,
      maxInputBytes: 2048,
      shutdownTimeoutMs: 0,
      prefetch: 5,
      pollIntervalMs: 250,
      heartbeatIntervalMs: 1000,
      reaperIntervalMs: 2000,
      staleAfterMs: 6000,
    });
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
