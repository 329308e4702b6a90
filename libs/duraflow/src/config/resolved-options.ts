import { PayloadCodec } from '../domain/payload-codec';
import { randomUUID } from 'node:crypto';
import { ResolvedRunLogOptions, resolveRunLogOptions } from './run-log.options';
import { ResolvedCallbackOptions, resolveCallbackOptions } from './callbacks.options';
import { ResolvedStreamOptions, resolveStreamOptions } from './stream.options';
import { ResolvedEventOptions, resolveEventOptions } from './event.options';
import { hostname } from 'node:os';
import { MAX_JSON_DEPTH } from '../domain/duraflow.constants';
import { InvalidDuraflowOptionsError } from '../domain/errors';
import { checkInteger, checkText } from './option-checks';
import { FunctionalWorkflowDefinition, UNKNOWN_INPUT_PROPERTIES, UnknownInputProperties } from '../domain/workflow-definition';
import {
  DURAFLOW_DEFAULTS,
  defaultLeaseConfirmAfterMs,
  DuraflowBackpressureOptions,
  DuraflowModuleOptions,
  DuraflowPooler,
  DuraflowReaperOptions,
  DuraflowRedisOptions,
  DuraflowSignalOptions,
  DuraflowWorkerOptions,
} from './duraflow.options';
import { ResolvedMetricsOptions, resolveMetricsOptions } from './metrics.options';
import { DEFAULT_BACKOFF, DEFAULT_COMPENSATION_OPTIONS, ResolvedStepOptions, resolveStepOptions } from './step.options';

export { DEFAULT_BACKOFF, DEFAULT_COMPENSATION_OPTIONS, ResolvedBackoff, ResolvedStepOptions, resolveStepOptions } from './step.options';
import { MAX_NODE_ID_LENGTH, nodeIncarnationWorkerId } from './node-incarnation';

/** Every option with its default applied: the one place defaults live. */
export interface ResolvedDuraflowOptions {
  dataSource: string | undefined;
  pooler: DuraflowPooler;
  listenUrl: string | undefined;
  workerId: string;
  redis: DuraflowRedisOptions | undefined;
  worker: Required<Omit<DuraflowWorkerOptions, 'backpressure' | 'nodeId'>> & {
    backpressure: Required<DuraflowBackpressureOptions>;
    /** This node's stable identity, or undefined (no lock, no recovery at boot). */
    nodeId: string | undefined;
  };
  heartbeatIntervalMs: number;
  reaper: Required<DuraflowReaperOptions>;
  retention: ResolvedRetention;
  workflows: FunctionalWorkflowDefinition[];
  maxRetries: number;
  step: ResolvedStepOptions;
  compensation: ResolvedStepOptions;
  maxInputBytes: number;
  maxOutputBytes: number;
  maxJsonDepth: number;
  maxListPageBytes: number;
  unknownInputProperties: UnknownInputProperties;
  metrics: ResolvedMetricsOptions | null;
  signals: Required<DuraflowSignalOptions>;
  logs: ResolvedRunLogOptions;
  streams: ResolvedStreamOptions;
  codec: PayloadCodec | undefined;
  /** Callback urls; null: not configured. */
  callbacks: ResolvedCallbackOptions | null;
  events: ResolvedEventOptions;
}

export interface ResolvedRetention {
  completed: number | undefined;
  failed: number | undefined;
  rolledBack: number | undefined;
  cancelled: number | undefined;
  batchSize: number;
  intervalMs: number;
}

/** The statuses retention applies to, by option name. */
export const RETENTION_STATUSES = ['completed', 'failed', 'rolledBack', 'cancelled'] as const;

export function resolveDuraflowOptions(options: DuraflowModuleOptions = {}): ResolvedDuraflowOptions {
  const defaults = DURAFLOW_DEFAULTS;
  if (options.retention !== undefined && (typeof options.retention !== 'object' || options.retention === null)) {
    throw new InvalidDuraflowOptionsError('retention', 'must be { completed?, failed?, rolledBack?, cancelled? } (durations in ms).');
  }
  const staleAfterMs = options.reaper?.staleAfterMs ?? defaults.reaper.staleAfterMs;
  const resolved: ResolvedDuraflowOptions = {
    dataSource: options.dataSource,
    pooler: options.pooler ?? 'none',
    listenUrl: options.listenUrl,
    workerId: defaultWorkerId(options),
    redis: options.redis,
    worker: resolveWorker(options.worker, staleAfterMs),
    heartbeatIntervalMs: options.heartbeatIntervalMs ?? defaults.heartbeatIntervalMs,
    reaper: {
      enabled: options.reaper?.enabled ?? defaults.reaper.enabled,
      intervalMs: options.reaper?.intervalMs ?? defaults.reaper.intervalMs,
      staleAfterMs,
      leaderTtlMs: options.reaper?.leaderTtlMs ?? defaults.reaper.leaderTtlMs,
      leaderKey: options.reaper?.leaderKey ?? defaults.reaper.leaderKey,
    },
    retention: {
      completed: options.retention?.completed,
      failed: options.retention?.failed,
      rolledBack: options.retention?.rolledBack,
      cancelled: options.retention?.cancelled,
      batchSize: options.retention?.batchSize ?? defaults.retention.batchSize,
      intervalMs: options.retention?.intervalMs ?? defaults.retention.intervalMs,
    },
    workflows: options.workflows ?? [],
    maxRetries: options.maxRetries ?? defaults.maxRetries,
    step: resolveStepOptions(options.step, { retries: 0, timeout: undefined, backoff: DEFAULT_BACKOFF, recordStart: false }, 'step'),
    compensation: resolveStepOptions(options.compensation, DEFAULT_COMPENSATION_OPTIONS, 'compensation'),
    maxInputBytes: options.maxInputBytes ?? defaults.maxInputBytes,
    maxOutputBytes: options.maxOutputBytes ?? defaults.maxOutputBytes,
    maxJsonDepth: options.maxJsonDepth ?? defaults.maxJsonDepth,
    maxListPageBytes: options.maxListPageBytes ?? defaults.maxListPageBytes,
    unknownInputProperties: options.unknownInputProperties ?? defaults.unknownInputProperties,
    metrics: resolveMetricsOptions(options.metrics),
    signals: { maxKeptPerTask: options.signals?.maxKeptPerTask ?? defaults.signals.maxKeptPerTask },
    logs: resolveRunLogOptions(options.logs),
    streams: resolveStreamOptions(options.streams),
    codec: options.codec,
    callbacks: resolveCallbackOptions(options.callbacks),
    events: resolveEventOptions(options.events),
  };
  checkResolvedOptions(resolved);
  return resolved;
}

function resolveWorker(worker: DuraflowWorkerOptions | undefined, staleAfterMs: number): ResolvedDuraflowOptions['worker'] {
  const defaults = DURAFLOW_DEFAULTS.worker;
  return {
    enabled: worker?.enabled ?? defaults.enabled,
    concurrency: worker?.concurrency ?? defaults.concurrency,
    pollIntervalMs: worker?.pollIntervalMs ?? defaults.pollIntervalMs,
    maxIdlePollIntervalMs: worker?.maxIdlePollIntervalMs ?? defaults.maxIdlePollIntervalMs,
    prefetch: worker?.prefetch ?? defaults.prefetch,
    shutdownTimeoutMs: worker?.shutdownTimeoutMs ?? defaults.shutdownTimeoutMs,
    nodeId: worker?.nodeId,
    leaseConfirmAfterMs:
      worker?.leaseConfirmAfterMs ?? (typeof staleAfterMs === 'number' ? defaultLeaseConfirmAfterMs(staleAfterMs) : staleAfterMs),
    backpressure: {
      maxQueuedTasks: worker?.backpressure?.maxQueuedTasks ?? defaults.backpressure.maxQueuedTasks,
      maxEventLoopLagMs: worker?.backpressure?.maxEventLoopLagMs ?? defaults.backpressure.maxEventLoopLagMs,
      lagWindowMs: worker?.backpressure?.lagWindowMs ?? defaults.backpressure.lagWindowMs,
      slowdownFactor: worker?.backpressure?.slowdownFactor ?? defaults.backpressure.slowdownFactor,
    },
  };
}

/** Every resolved option in range, else InvalidDuraflowOptionsError naming the first that is not. */
function checkResolvedOptions(resolved: ResolvedDuraflowOptions): void {
  checkConnections(resolved);
  checkTimings(resolved);
  checkRetention(resolved.retention);
  checkLimits(resolved);
}

/** Who this process is and how it reaches PostgreSQL and Redis. */
function checkConnections(resolved: ResolvedDuraflowOptions): void {
  checkNodeId(resolved);
  checkText('workerId', resolved.workerId, 255);
  if (resolved.pooler !== 'none' && resolved.pooler !== 'pgbouncer-transaction') {
    throw new InvalidDuraflowOptionsError('pooler', `must be 'none' or 'pgbouncer-transaction', got ${String(resolved.pooler)}.`);
  }
  if (resolved.listenUrl !== undefined && !(typeof resolved.listenUrl === 'string' && /^postgres(ql)?:\/\/./.test(resolved.listenUrl))) {
    throw new InvalidDuraflowOptionsError(
      'listenUrl',
      'must be a postgres:// URL of a direct connection (not through the pooler), or omitted.',
    );
  }
  if (
    resolved.redis !== undefined &&
    (typeof resolved.redis !== 'object' || resolved.redis === null || !(resolved.redis.url || resolved.redis.host))
  ) {
    throw new InvalidDuraflowOptionsError(
      'redis',
      'must be { url } or { host, port, ... }; omit it to elect the reaper leader through PostgreSQL.',
    );
  }
}

/** A worker id given, or one made up: `<nodeId>#<random>` with a node id (which a given one cannot be). */
function defaultWorkerId(options: DuraflowModuleOptions): string {
  const nodeId = options.worker?.nodeId;
  if (nodeId !== undefined && options.workerId !== undefined) {
    throw new InvalidDuraflowOptionsError(
      'workerId',
      'cannot be given with worker.nodeId: each process of a node gets a worker id of its own, `<nodeId>#<random>`, ' +
        'which is how a restarted node finds the tasks its earlier process left running. Give only worker.nodeId.',
    );
  }
  if (typeof nodeId === 'string' && nodeId.length > 0) return nodeIncarnationWorkerId(nodeId);
  return options.workerId ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
}

/** A node id holds its lock on a session of its own: behind a transaction-mode pooler, that needs `listenUrl`. */
function checkNodeId(resolved: ResolvedDuraflowOptions): void {
  const { nodeId } = resolved.worker;
  if (nodeId === undefined) return;
  checkText('worker.nodeId', nodeId, MAX_NODE_ID_LENGTH);
  if (resolved.pooler === 'pgbouncer-transaction' && resolved.listenUrl === undefined) {
    throw new InvalidDuraflowOptionsError(
      'worker.nodeId',
      "needs listenUrl with pooler 'pgbouncer-transaction': the node's lock is held by a session of its own, " +
        'which a transaction-mode pooler does not keep. Give listenUrl (a direct connection to PostgreSQL), or no nodeId.',
    );
  }
}

/** The worker's and the reaper's numbers, and how they fit together. */
function checkTimings(resolved: ResolvedDuraflowOptions): void {
  checkInteger('worker.concurrency', resolved.worker.concurrency, 1);
  checkInteger('worker.pollIntervalMs', resolved.worker.pollIntervalMs, 1);
  checkInteger('worker.maxIdlePollIntervalMs', resolved.worker.maxIdlePollIntervalMs, 1);
  if (resolved.worker.prefetch !== 'auto') checkInteger('worker.prefetch', resolved.worker.prefetch, 0, `or 'auto'`);
  checkInteger('worker.shutdownTimeoutMs', resolved.worker.shutdownTimeoutMs, 0);
  checkInteger('worker.backpressure.maxQueuedTasks', resolved.worker.backpressure.maxQueuedTasks, 1);
  checkInteger('worker.backpressure.maxEventLoopLagMs', resolved.worker.backpressure.maxEventLoopLagMs, 1);
  checkInteger('worker.backpressure.lagWindowMs', resolved.worker.backpressure.lagWindowMs, 10);
  checkInteger('worker.backpressure.slowdownFactor', resolved.worker.backpressure.slowdownFactor, 1);
  checkInteger('heartbeatIntervalMs', resolved.heartbeatIntervalMs, 1);
  checkInteger('reaper.intervalMs', resolved.reaper.intervalMs, 1);
  checkInteger('reaper.staleAfterMs', resolved.reaper.staleAfterMs, 1);
  checkInteger('reaper.leaderTtlMs', resolved.reaper.leaderTtlMs, 1);
  checkInteger('worker.leaseConfirmAfterMs', resolved.worker.leaseConfirmAfterMs, 0);
  if (resolved.worker.leaseConfirmAfterMs >= resolved.reaper.staleAfterMs) {
    throw new InvalidDuraflowOptionsError(
      'worker.leaseConfirmAfterMs',
      `must be less than reaper.staleAfterMs (${resolved.reaper.staleAfterMs}), got ${resolved.worker.leaseConfirmAfterMs}: ` +
        'a lease must be confirmed while the reaper still leaves the task to its worker.',
    );
  }
  checkText('reaper.leaderKey', resolved.reaper.leaderKey, 255);
}

function checkRetention(retention: ResolvedRetention): void {
  for (const status of RETENTION_STATUSES) {
    const keepMs = retention[status];
    if (keepMs !== undefined) checkInteger(`retention.${status}`, keepMs, 0, '(ms after the task finished; omit it to keep forever)');
  }
  checkInteger('retention.batchSize', retention.batchSize, 1);
  checkInteger('retention.intervalMs', retention.intervalMs, 1);
}

/** Retries, sizes and the rest of what a submit and a run are checked against. */
function checkLimits(resolved: ResolvedDuraflowOptions): void {
  checkInteger('maxRetries', resolved.maxRetries, 0);
  checkInteger('maxInputBytes', resolved.maxInputBytes, 1);
  checkInteger('maxOutputBytes', resolved.maxOutputBytes, 1);
  checkInteger('maxJsonDepth', resolved.maxJsonDepth, 1);
  if (resolved.maxJsonDepth > MAX_JSON_DEPTH) {
    throw new InvalidDuraflowOptionsError('maxJsonDepth', `must be at most ${MAX_JSON_DEPTH}, got ${resolved.maxJsonDepth}.`);
  }
  checkInteger('maxListPageBytes', resolved.maxListPageBytes, 1);
  checkInteger('signals.maxKeptPerTask', resolved.signals.maxKeptPerTask, 1);
  if (!UNKNOWN_INPUT_PROPERTIES.includes(resolved.unknownInputProperties)) {
    throw new InvalidDuraflowOptionsError(
      'unknownInputProperties',
      `must be 'strip' or 'reject', got ${String(resolved.unknownInputProperties)}.`,
    );
  }
  if (!Array.isArray(resolved.workflows)) {
    throw new InvalidDuraflowOptionsError('workflows', 'must be an array of workflow(name, fn) definitions.');
  }
}
