import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { DURAFLOW_DEFAULTS } from '@duraflow/nestjs';
import { redactPassword } from './redact-password';

/** The engine's settings, read once from the environment; a bad value stops the start. */
export interface EngineConfig {
  /** HTTP port; 0 picks a free one. */
  port: number;
  grpcPort: number;
  /**
   * The address HTTP and gRPC bind to: HOST, else 127.0.0.1 (this machine only) without an
   * API key and 0.0.0.0 (every interface) with one.
   */
  host: string;
  /** The PostgreSQL to use; undefined starts the embedded database in `dataDir`. */
  databaseUrl: string | undefined;
  /** Absolute path of the embedded database's files. */
  dataDir: string;
  /** Port of the embedded database; 0 picks a free one at each start. */
  embeddedDatabasePort: number;
  /** Redis for the reaper's leader election; undefined uses the no-Redis fallback. */
  redisUrl: string | undefined;
  /** When set, every API call must carry it (header `x-api-key` or `Authorization: Bearer`). */
  apiKey: string | undefined;
  /** Serve HTTP and gRPC (false = a worker-only node). */
  http: boolean;
  /** Run a worker in this process (false = a submit-only node). */
  worker: boolean;
  /** Apply migrations/ on start. */
  migrate: boolean;
  concurrency: number;
  /** The largest input, as JSON bytes (the library's maxInputBytes); request bodies may be a little larger. */
  maxInputBytes: number;
  /** On shutdown, how long running tasks may finish before they are handed back. */
  shutdownTimeoutMs: number;
  /** Tasks claimed ahead of free slots: `'auto'` or a number. */
  prefetch: number | 'auto';
  pollIntervalMs: number;
  heartbeatIntervalMs: number;
  reaperIntervalMs: number;
  staleAfterMs: number;
}

export class EngineConfigError extends Error {
  constructor(
    readonly variable: string,
    value: string,
    expected: string,
  ) {
    super(`Environment variable ${variable}=${JSON.stringify(value)} is invalid: expected ${expected}.`);
    this.name = 'EngineConfigError';
  }
}

type Env = NodeJS.ProcessEnv;

/** An unset or empty variable takes its default. */
function raw(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  const parsed = /^-?\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(parsed) || parsed < min || parsed > max) {
    throw new EngineConfigError(name, value, `an integer from ${min} to ${max}`);
  }
  return parsed;
}

function boolean(env: Env, name: string, fallback: boolean): boolean {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  if (/^(true|1|yes|on)$/i.test(value)) return true;
  if (/^(false|0|no|off)$/i.test(value)) return false;
  throw new EngineConfigError(name, value, 'true or false');
}

function url(env: Env, name: string, protocols: string[]): string | undefined {
  const value = raw(env, name);
  if (value === undefined) return undefined;
  let parsed: URL | undefined;
  try {
    parsed = new URL(value);
  } catch {
    parsed = undefined;
  }
  if (!parsed || !protocols.includes(parsed.protocol)) {
    // The message goes to logs.
    throw new EngineConfigError(name, redactPassword(value), `a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}`);
  }
  return value;
}

/** `auto`, or an integer in range. */
function prefetch(env: Env, name: string, fallback: number | 'auto', max: number): number | 'auto' {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  if (value.toLowerCase() === 'auto') return 'auto';
  const parsed = /^\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(parsed) || parsed > max) throw new EngineConfigError(name, value, `auto or an integer from 0 to ${max}`);
  return parsed;
}

/** An IP address or a host name (e.g. localhost). */
function host(env: Env, name: string, fallback: string): string {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  const bare = value.replace(/^\[(.*)\]$/, '$1');
  if (!isIP(bare) && !/^[A-Za-z0-9]([A-Za-z0-9.-]{0,252})$/.test(bare)) {
    throw new EngineConfigError(name, value, 'an IP address (127.0.0.1, 0.0.0.0, ::) or a host name');
  }
  return bare;
}

const DAY_MS = 86_400_000;
const MIB = 1024 * 1024;

/**
 * Reads the engine's settings; a variable left unset takes the library's default
 * (DURAFLOW_DEFAULTS), and the ranges are the engine's own.
 */
export function loadEngineConfig(env: Env = process.env): EngineConfig {
  const { worker, reaper, heartbeatIntervalMs, maxInputBytes } = DURAFLOW_DEFAULTS;
  const databaseUrl = url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']);
  const apiKey = raw(env, 'DURAFLOW_API_KEY');
  const config: EngineConfig = {
    port: integer(env, 'PORT', 3000, 0, 65535),
    grpcPort: integer(env, 'GRPC_PORT', 50051, 1, 65535),
    // Without a key, anyone who can reach the API may use it: only this machine, unless HOST says otherwise.
    host: host(env, 'HOST', apiKey === undefined ? '127.0.0.1' : '0.0.0.0'),
    databaseUrl,
    dataDir: resolve(raw(env, 'DURAFLOW_DATA_DIR') ?? '.duraflow'),
    embeddedDatabasePort: integer(env, 'DURAFLOW_EMBEDDED_DB_PORT', 0, 0, 65535),
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    apiKey,
    http: boolean(env, 'DURAFLOW_HTTP', true),
    worker: boolean(env, 'DURAFLOW_WORKER', true),
    migrate: boolean(env, 'DURAFLOW_MIGRATE', true),
    concurrency: integer(env, 'DURAFLOW_CONCURRENCY', worker.concurrency, 1, 10_000),
    maxInputBytes: integer(env, 'DURAFLOW_MAX_INPUT_BYTES', maxInputBytes, 1, 256 * MIB),
    shutdownTimeoutMs: integer(env, 'DURAFLOW_SHUTDOWN_TIMEOUT_MS', worker.shutdownTimeoutMs, 0, DAY_MS),
    prefetch: prefetch(env, 'DURAFLOW_PREFETCH', worker.prefetch, 10_000),
    pollIntervalMs: integer(env, 'DURAFLOW_POLL_INTERVAL_MS', worker.pollIntervalMs, 1, DAY_MS),
    heartbeatIntervalMs: integer(env, 'DURAFLOW_HEARTBEAT_INTERVAL_MS', heartbeatIntervalMs, 1, DAY_MS),
    reaperIntervalMs: integer(env, 'DURAFLOW_REAPER_INTERVAL_MS', reaper.intervalMs, 1, DAY_MS),
    staleAfterMs: integer(env, 'DURAFLOW_STALE_AFTER_MS', reaper.staleAfterMs, 1, DAY_MS),
  };
  // A heartbeat that comes less often than the reaper's limit makes every running task look dead.
  if (config.staleAfterMs <= config.heartbeatIntervalMs) {
    throw new EngineConfigError(
      'DURAFLOW_STALE_AFTER_MS',
      String(config.staleAfterMs),
      `more than DURAFLOW_HEARTBEAT_INTERVAL_MS (${config.heartbeatIntervalMs}), or running tasks are reaped while alive`,
    );
  }
  if (!config.http && !config.worker) {
    throw new EngineConfigError(
      'DURAFLOW_HTTP',
      'false',
      'true while DURAFLOW_WORKER is false: a node with neither the API nor a worker has nothing to do',
    );
  }
  return config;
}
