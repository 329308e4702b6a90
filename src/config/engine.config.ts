import { isIP } from 'node:net';
import { resolve } from 'node:path';
import {
  AesGcmCodec,
  codecFromEnv,
  DURAFLOW_DEFAULTS,
  DuraflowPooler,
  DuraflowRetentionOptions,
  defaultLeaseConfirmAfterMs,
  InvalidDuraflowOptionsError,
} from '@duraflow/nestjs';
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
  /**
   * `Host` names the HTTP server answers to besides IP addresses, localhost and HOST (lower case,
   * `name` or `name:port`); with `apiKey` and this empty, any name (src/http/allowed-hosts.ts).
   */
  allowedHosts: string[];
  /**
   * Express's `trust proxy`: which proxies' `X-Forwarded-For` / `X-Forwarded-Proto` to believe
   * (false: none; a number: that many hops; else their addresses or subnets).
   */
  trustProxy: false | number | string[];
  /** A dashboard sign-in ends after this long unused, or this long after it began. */
  dashboardSession: { idleMs: number; maxMs: number };
  /** Serve HTTP and gRPC (false = a worker-only node). */
  http: boolean;
  /** Run a worker in this process (false = a submit-only node). */
  worker: boolean;
  /**
   * This node's stable identity across restarts (the library's `worker.nodeId`): a restarted
   * process takes back at once the tasks its earlier process left running. Unset: none.
   */
  nodeId: string | undefined;
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
  /** The longest wait of an idle worker's poll (`worker.maxIdlePollIntervalMs`). */
  maxIdlePollIntervalMs: number;
  heartbeatIntervalMs: number;
  reaperIntervalMs: number;
  staleAfterMs: number;
  /** A lease older than this is confirmed before the next step (`worker.leaseConfirmAfterMs`). */
  leaseConfirmAfterMs: number;
  /** What sits between the engine and DATABASE_URL (the library's `pooler`). */
  pooler: DuraflowPooler;
  /** A direct connection past the pooler for LISTEN and the sessions that hold state (`listenUrl`). */
  listenUrl: string | undefined;
  /** The library's `retention`: ms kept after finishing per final status (undefined: forever), batch size, interval. */
  retention: DuraflowRetentionOptions & { batchSize: number; intervalMs: number };
  /**
   * Callback urls (the library's `callbacks`): DURAFLOW_CALLBACK_BASE_URL and _SECRET (both or
   * neither), DURAFLOW_CALLBACK_PATH. Undefined: `ctx.createCallback` is refused.
   */
  callbacks: { baseUrl: string; secret: string; path: string } | undefined;
  /**
   * Encryption at rest (the library's `codec`): DURAFLOW_CODEC_KEYS=id:base64,id:base64 and
   * DURAFLOW_CODEC_CURRENT=id, read as `duraflow reencrypt` reads them. Undefined: plain JSON.
   */
  codec: AesGcmCodec | undefined;
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

/** The callback url settings: the base url and the secret together (a secret of 32 bytes or more), or neither. */
function callbackSettings(env: Env): EngineConfig['callbacks'] {
  const baseUrl = url(env, 'DURAFLOW_CALLBACK_BASE_URL', ['http:', 'https:']);
  const secret = raw(env, 'DURAFLOW_CALLBACK_SECRET');
  const path = raw(env, 'DURAFLOW_CALLBACK_PATH') ?? '/duraflow/callbacks';
  if (baseUrl === undefined && secret === undefined) return undefined;
  if (baseUrl === undefined)
    throw new EngineConfigError('DURAFLOW_CALLBACK_BASE_URL', '', 'the URL callbacks are reached at, with DURAFLOW_CALLBACK_SECRET');
  if (secret === undefined || Buffer.byteLength(secret, 'utf8') < 32) {
    // The message goes to logs: never the secret itself.
    throw new EngineConfigError(
      'DURAFLOW_CALLBACK_SECRET',
      secret === undefined ? '' : '(hidden)',
      'a secret of at least 32 bytes (openssl rand -base64 48)',
    );
  }
  if (!/^(\/[A-Za-z0-9._~-]+)+\/?$/.test(path))
    throw new EngineConfigError('DURAFLOW_CALLBACK_PATH', path, 'a path such as /duraflow/callbacks');
  return { baseUrl, secret, path: path.replace(/\/$/, '') };
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

/** One of `choices`, in any case. */
function oneOf<T extends string>(env: Env, name: string, fallback: T, choices: readonly T[]): T {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  const choice = choices.find((c) => c === value.toLowerCase());
  if (choice === undefined) throw new EngineConfigError(name, value, choices.join(' or '));
  return choice;
}

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * A duration with its unit (`7d`, `12h`, `30m`, `45s`, `500ms`); unset is undefined. The unit is
 * required: a bare `7` read as milliseconds would remove every finished task at once.
 */
function duration(env: Env, name: string, maxDays: number): number | undefined {
  const value = raw(env, name);
  if (value === undefined) return undefined;
  const match = /^(\d+)\s*(ms|s|m|h|d)$/i.exec(value);
  const ms = match ? Number(match[1]) * UNIT_MS[match[2].toLowerCase() as keyof typeof UNIT_MS] : NaN;
  if (!Number.isSafeInteger(ms) || ms > maxDays * UNIT_MS.d) {
    throw new EngineConfigError(
      name,
      value,
      `a whole number with a unit, ms, s, m, h or d (e.g. 7d, 12h, 30m), up to ${maxDays}d; unset keeps these tasks forever`,
    );
  }
  return ms;
}

/** Printable characters without spaces, at most `maxLength` of them; unset is undefined. */
function word(env: Env, name: string, maxLength: number): string | undefined {
  const value = raw(env, name);
  if (value === undefined) return undefined;
  if (value.length > maxLength || !/^[\x21-\x7e]+$/.test(value)) {
    throw new EngineConfigError(name, value, `up to ${maxLength} printable characters without spaces (e.g. the pod's name)`);
  }
  return value;
}

/** A dashboard session's lifetime with its unit (`30m`, `12h`): from a second to 30 days. */
function lifetime(env: Env, name: string, fallback: number): number {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  const match = /^(\d+)\s*(s|m|h|d)$/i.exec(value);
  const ms = match ? Number(match[1]) * UNIT_MS[match[2].toLowerCase() as keyof typeof UNIT_MS] : NaN;
  if (!Number.isSafeInteger(ms) || ms < 1_000 || ms > 30 * DAY_MS) {
    throw new EngineConfigError(name, value, 'a whole number with a unit, s, m, h or d (e.g. 30m, 12h), from 1s to 30d');
  }
  return ms;
}

/** Comma-separated host names, each with an optional port (`ops.example.com`, `engine:3000`, `[::1]`), lower case. */
function hostList(env: Env, name: string): string[] {
  const value = raw(env, name);
  if (value === undefined) return [];
  const hosts = value.split(',').map((entry) => entry.trim().toLowerCase());
  if (hosts.some((entry) => !/^([a-z0-9]([a-z0-9.-]{0,252})|\[[0-9a-f:.]+\])(:\d{1,5})?$/.test(entry))) {
    throw new EngineConfigError(name, value, 'host names separated by commas, each with an optional port (ops.example.com,engine:3000)');
  }
  return hosts;
}

/** `false`, `true` (one proxy in front), a number of proxies, or their addresses and subnets, comma-separated. */
function trustProxy(env: Env, name: string): false | number | string[] {
  const value = raw(env, name);
  if (value === undefined || /^(false|0|no|off)$/i.test(value)) return false;
  if (/^(true|yes|on)$/i.test(value)) return 1;
  if (/^\d{1,2}$/.test(value)) return Number(value);
  const entries = value.split(',').map((entry) => entry.trim());
  const known = /^(loopback|linklocal|uniquelocal)$/;
  if (entries.some((entry) => !known.test(entry) && !isIP(entry.replace(/\/\d{1,3}$/, '')))) {
    throw new EngineConfigError(
      name,
      value,
      'false, true (one proxy in front), a number of proxies, or their addresses/subnets separated by commas (10.0.0.0/8,loopback)',
    );
  }
  return entries;
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
/** The longest retention accepted: 100 years. */
const MAX_RETENTION_DAYS = 36_500;
const POOLERS: readonly DuraflowPooler[] = ['none', 'pgbouncer-transaction'];

/**
 * Reads the engine's settings; a variable left unset takes the library's default
 * (DURAFLOW_DEFAULTS), and the ranges are the engine's own.
 */
/** The codec of DURAFLOW_CODEC_KEYS / _CURRENT; a key's value is never printed. */
function codecSettings(env: Env): AesGcmCodec | undefined {
  try {
    return codecFromEnv(env);
  } catch (error) {
    if (!(error instanceof InvalidDuraflowOptionsError)) throw error;
    const variable =
      error.option.startsWith('DURAFLOW_CODEC_CURRENT') || error.option === 'codec.current'
        ? 'DURAFLOW_CODEC_CURRENT'
        : 'DURAFLOW_CODEC_KEYS';
    throw new EngineConfigError(variable, '(not shown)', error.message);
  }
}

export function loadEngineConfig(env: Env = process.env): EngineConfig {
  const { worker, reaper, heartbeatIntervalMs, maxInputBytes, retention } = DURAFLOW_DEFAULTS;
  const databaseUrl = url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']);
  const apiKey = raw(env, 'DURAFLOW_API_KEY');
  const staleAfterMs = integer(env, 'DURAFLOW_STALE_AFTER_MS', reaper.staleAfterMs, 1, DAY_MS);
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
    allowedHosts: hostList(env, 'DURAFLOW_ALLOWED_HOSTS'),
    trustProxy: trustProxy(env, 'DURAFLOW_TRUST_PROXY'),
    dashboardSession: {
      idleMs: lifetime(env, 'DURAFLOW_DASHBOARD_SESSION_IDLE', 30 * 60_000),
      maxMs: lifetime(env, 'DURAFLOW_DASHBOARD_SESSION_MAX', 12 * 3_600_000),
    },
    http: boolean(env, 'DURAFLOW_HTTP', true),
    worker: boolean(env, 'DURAFLOW_WORKER', true),
    nodeId: word(env, 'DURAFLOW_NODE_ID', 200),
    migrate: boolean(env, 'DURAFLOW_MIGRATE', true),
    concurrency: integer(env, 'DURAFLOW_CONCURRENCY', worker.concurrency, 1, 10_000),
    maxInputBytes: integer(env, 'DURAFLOW_MAX_INPUT_BYTES', maxInputBytes, 1, 256 * MIB),
    shutdownTimeoutMs: integer(env, 'DURAFLOW_SHUTDOWN_TIMEOUT_MS', worker.shutdownTimeoutMs, 0, DAY_MS),
    prefetch: prefetch(env, 'DURAFLOW_PREFETCH', worker.prefetch, 10_000),
    pollIntervalMs: integer(env, 'DURAFLOW_POLL_INTERVAL_MS', worker.pollIntervalMs, 1, DAY_MS),
    heartbeatIntervalMs: integer(env, 'DURAFLOW_HEARTBEAT_INTERVAL_MS', heartbeatIntervalMs, 1, DAY_MS),
    reaperIntervalMs: integer(env, 'DURAFLOW_REAPER_INTERVAL_MS', reaper.intervalMs, 1, DAY_MS),
    staleAfterMs,
    maxIdlePollIntervalMs: integer(env, 'DURAFLOW_MAX_IDLE_POLL_INTERVAL_MS', worker.maxIdlePollIntervalMs, 1, DAY_MS),
    leaseConfirmAfterMs: integer(env, 'DURAFLOW_LEASE_CONFIRM_AFTER_MS', defaultLeaseConfirmAfterMs(staleAfterMs), 0, DAY_MS),
    pooler: oneOf(env, 'DURAFLOW_POOLER', 'none', POOLERS),
    listenUrl: url(env, 'DURAFLOW_LISTEN_URL', ['postgres:', 'postgresql:']),
    retention: {
      completed: duration(env, 'DURAFLOW_RETENTION_COMPLETED', MAX_RETENTION_DAYS),
      failed: duration(env, 'DURAFLOW_RETENTION_FAILED', MAX_RETENTION_DAYS),
      rolledBack: duration(env, 'DURAFLOW_RETENTION_ROLLED_BACK', MAX_RETENTION_DAYS),
      cancelled: duration(env, 'DURAFLOW_RETENTION_CANCELLED', MAX_RETENTION_DAYS),
      batchSize: integer(env, 'DURAFLOW_RETENTION_BATCH_SIZE', retention.batchSize, 1, 100_000),
      intervalMs: integer(env, 'DURAFLOW_RETENTION_INTERVAL_MS', retention.intervalMs, 1, DAY_MS),
    },
    callbacks: callbackSettings(env),
    codec: codecSettings(env),
  };
  // A heartbeat that comes less often than the reaper's limit makes every running task look dead.
  if (config.staleAfterMs <= config.heartbeatIntervalMs) {
    throw new EngineConfigError(
      'DURAFLOW_STALE_AFTER_MS',
      String(config.staleAfterMs),
      `more than DURAFLOW_HEARTBEAT_INTERVAL_MS (${config.heartbeatIntervalMs}), or running tasks are reaped while alive`,
    );
  }
  // A lease confirmed only after the reaper may have handed its task to another worker protects nothing.
  if (config.leaseConfirmAfterMs >= config.staleAfterMs) {
    throw new EngineConfigError(
      'DURAFLOW_LEASE_CONFIRM_AFTER_MS',
      String(config.leaseConfirmAfterMs),
      `less than DURAFLOW_STALE_AFTER_MS (${config.staleAfterMs}), or a run can go on after its task was handed to another worker`,
    );
  }
  // The embedded database has no pooler in front of it, and its sessions need no other address.
  if (config.databaseUrl === undefined && config.pooler !== 'none') {
    throw new EngineConfigError(
      'DURAFLOW_POOLER',
      config.pooler,
      'none without DATABASE_URL: the embedded database is reached directly, with no pooler in between',
    );
  }
  if (config.databaseUrl === undefined && config.listenUrl !== undefined) {
    throw new EngineConfigError(
      'DURAFLOW_LISTEN_URL',
      redactPassword(config.listenUrl),
      'unset without DATABASE_URL: the embedded database is reached directly, its LISTEN included',
    );
  }
  // The node's lock is held by a session of its own, which a transaction-mode pooler does not keep.
  if (config.nodeId !== undefined && config.pooler !== 'none' && config.listenUrl === undefined) {
    throw new EngineConfigError(
      'DURAFLOW_NODE_ID',
      config.nodeId,
      'unset behind a transaction-mode pooler without DURAFLOW_LISTEN_URL: the node holds its lock on a direct connection',
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
