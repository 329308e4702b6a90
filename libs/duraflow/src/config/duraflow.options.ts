import { PayloadCodec } from '../domain/payload-codec';
import { FunctionalWorkflowDefinition, UnknownInputProperties } from '../domain/workflow-definition';
import { DuraflowRunLogOptions } from './run-log.options';
import { DuraflowCallbackOptions } from './callbacks.options';
import { DuraflowStreamOptions } from './stream.options';
import { DuraflowEventOptions } from './event.options';
import type { ScheduleDefinition } from '../domain/schedule-options';
import { StepOptions } from '../domain/workflow-context';
import { DEFAULT_MAX_JSON_DEPTH, REAPER_LEADER_KEY } from '../domain/duraflow.constants';
import { DuraflowMetricsOptions } from './metrics.options';

export interface DuraflowRedisOptions {
  /** e.g. `redis://127.0.0.1:6379`. */
  url?: string;
  host?: string;
  port?: number;
  password?: string;
  db?: number;
}

export interface DuraflowWorkerOptions {
  /** false = a submit-only node: no claiming, no execution. Default true. */
  enabled?: boolean;
  /**
   * Tasks run at once by this process. Default 100: a run mostly waits on round trips (its
   * checkpoints, group-committed across runs), so a burst is served at the rate the database
   * commits, not one run's latency at a time; the event loop lag and `maxQueuedTasks` still hold
   * the worker back (docs/workers.md, "How many at once").
   */
  concurrency?: number;
  /** Fallback poll when no NOTIFY arrives (and for `scheduledAt`). Default 500 ms. */
  pollIntervalMs?: number;
  /**
   * While nothing happens (no task held, none claimed, no NOTIFY heard, LISTEN up) the poll
   * backs off, doubling from `pollIntervalMs` up to this; any NOTIFY or claimed task resets it.
   * A submit still starts at once (its NOTIFY wakes the worker); what waits up to this long on an
   * idle node is a task nobody announced: a `scheduledAt` coming due. At or below
   * `pollIntervalMs`: no backoff. Default 30 s.
   */
  maxIdlePollIntervalMs?: number;
  /**
   * Tasks claimed ahead of free slots, so a busy worker starts its next task without a round
   * trip (they are heartbeated, handed back on shutdown, and counted by backpressure).
   * A number, or `'auto'` (the default): up to `concurrency` ahead while this process's runs
   * are short (averaging under 50 ms, none running longer), none otherwise; and a task
   * claimed ahead that still waits for a slot after 500 ms is handed back to `pending` for
   * another worker. `0`: claim only for free slots.
   */
  prefetch?: number | 'auto';
  /** On shutdown, how long running tasks may finish before they are handed back. Default 10 s. */
  shutdownTimeoutMs?: number;
  /**
   * A run whose lease (its last heartbeat or claim that landed, on a monotonic clock) is older
   * than this confirms it with one fenced statement before it starts a step, a compensation or
   * the run function, and stops without calling them when another worker has the task by then
   * (its process was frozen, or its event loop blocked, past `reaper.staleAfterMs`). Younger
   * leases cost nothing: heartbeats keep a healthy run's lease younger than
   * `heartbeatIntervalMs`. 0 to confirm before every step; less than `reaper.staleAfterMs`.
   * Default `floor(reaper.staleAfterMs / 3)` (10 s with the default 30 s).
   */
  leaseConfirmAfterMs?: number;
  /** When to take less work: a process that lags or holds too many tasks claims less, instead of falling further behind. */
  backpressure?: DuraflowBackpressureOptions;
  /**
   * A stable identity of this node across its restarts (a StatefulSet's pod name, a systemd
   * instance name: docs/workers.md). The process holds the node's lock in PostgreSQL while it
   * runs; at boot it takes back at once the tasks an earlier process of this node left running
   * (a retry counted, as the reaper would) instead of leaving them to the reaper after
   * `reaper.staleAfterMs`. A second live process with the same id refuses to start
   * (NodeIdInUseError). Its worker id is then `<nodeId>#<8 hex digits>`, new in each process,
   * so `workerId` cannot be given with it. At most 246 characters. Default: none.
   */
  nodeId?: string;
}

export interface DuraflowBackpressureOptions {
  /** Tasks held by this process (running or waiting for a slot) above which it stops polling. Default 1000. */
  maxQueuedTasks?: number;
  /** Event loop lag (the longest delay seen in one window) above which it polls less often. Default 100 ms. */
  maxEventLoopLagMs?: number;
  /** The window event loop lag is measured over, then reset. Default 1000 ms. */
  lagWindowMs?: number;
  /** While lagging, the poll interval is multiplied by this and NOTIFY wake-ups are ignored. Default 4. */
  slowdownFactor?: number;
}

export interface DuraflowReaperOptions {
  /** Default true (the reaper runs only on the elected leader). */
  enabled?: boolean;
  /** Default 10 s. */
  intervalMs?: number;
  /** A running task whose heartbeat is older than this is stale. Default 30 s. */
  staleAfterMs?: number;
  /**
   * Leader key (or lease row) time-to-live: a frozen or blocked leader is replaced within it
   * plus one tick (a dead one sooner in PostgreSQL: its session is gone). Default 30 s.
   */
  leaderTtlMs?: number;
  /**
   * The Redis key the leader holds (the lease row's name without Redis). Default
   * `duraflow:reaper:leader`; give each deployment sharing one Redis its own.
   */
  leaderKey?: string;
}

/**
 * How long finished tasks are kept, in ms after they finished (`completed_at`), per final status;
 * an absent status is kept forever. The reaper's leader removes the older ones with their step
 * runs, in batches; a task with a dead letter still open is never removed.
 */
export interface DuraflowRetentionOptions {
  completed?: number;
  failed?: number;
  rolledBack?: number;
  cancelled?: number;
  /** Tasks removed per statement and status. Default 500. */
  batchSize?: number;
  /** How often the leader looks for expired tasks (it goes on at once while a batch comes back full). Default 60 s. */
  intervalMs?: number;
}

/** What sits between the DataSource and PostgreSQL: nothing, or pgbouncer in transaction mode. */
export type DuraflowPooler = 'none' | 'pgbouncer-transaction';

export interface DuraflowModuleOptions {
  /** Name of the host's TypeORM DataSource (`TypeOrmModule.forRoot({ name })`). Default: the default one. */
  dataSource?: string;
  /**
   * `'pgbouncer-transaction'` when the DataSource connects through pgbouncer in transaction mode:
   * no named prepared statements are sent, and the sessions that hold state (LISTEN, the
   * PostgreSQL leader election's lock, a dead letter's retry claim) use `listenUrl`; without it
   * nobody LISTENs (the workers poll every `pollIntervalMs`, said once at boot) and a dead
   * letter's retry holds its claim in a transaction. Default `'none'`.
   */
  pooler?: DuraflowPooler;
  /**
   * A direct connection to PostgreSQL (`postgres://user:pass@host:5432/db`, not through the
   * pooler) for the sessions that hold state: LISTEN, the leader election's lock, a dead
   * letter's retry claim. Default: the DataSource's own connection settings.
   */
  listenUrl?: string;
  /** This process's worker id (written to agent_tasks.worker_id). Default `<hostname>-<pid>-<random>` (`<worker.nodeId>#<random>` with a node id). */
  workerId?: string;
  /** Redis for reaper leader election; without it a lease row in PostgreSQL (duraflow_leader) elects the leader. */
  redis?: DuraflowRedisOptions;
  worker?: DuraflowWorkerOptions;
  /** Default 5 s. */
  heartbeatIntervalMs?: number;
  reaper?: DuraflowReaperOptions;
  /** Removal of old finished tasks, on the reaper's leader. Default: every task is kept forever. */
  retention?: DuraflowRetentionOptions;
  /** Functional workflow definitions (`workflow(name, fn)`). */
  workflows?: FunctionalWorkflowDefinition[];
  /** Cron schedules that start tasks of registered workflows, one task per tick across all nodes (docs/schedules.md). */
  schedules?: ScheduleDefinition[];
  /** Default `maxRetries` of a task when neither submit nor the workflow says. Default 3 (the column's default). */
  maxRetries?: number;
  /** Default options of every step. */
  step?: StepOptions;
  /**
   * Default options of every compensation (saga undo): `timeout` default 30 s, `retries`
   * default 2 (so up to 3 attempts) before the compensation goes to the dead-letter queue.
   */
  compensation?: StepOptions;
  /** Largest accepted input, as JSON bytes. Default 1 MiB. */
  maxInputBytes?: number;
  /**
   * Largest output a step or a workflow may return, as JSON bytes. A larger one is never
   * stored: the step (or the run) fails with OutputTooLargeError. Default 1 MiB.
   */
  maxOutputBytes?: number;
  /**
   * Deepest nesting of objects and arrays accepted in an input (InputValidationError) or an
   * output (the step fails with NotSerializableError), checked before anything recurses into
   * the value. 1 to 1000; default 100.
   */
  maxJsonDepth?: number;
  /**
   * Size of a `list` / `listDeadLetters` page, in bytes of its rows as text: a page ends early
   * (with a `nextCursor`) rather than go over it, and holds at least one item. Default 2 MiB.
   */
  maxListPageBytes?: number;
  /**
   * Input properties a workflow's `input` DTO does not declare, for workflows that do not say:
   * `'strip'` (the default) removes them before the input is stored, `'reject'` refuses the submit.
   */
  unknownInputProperties?: UnknownInputProperties;
  /** Prometheus metrics through prom-client (an optional peer): `true`, or `{ registry, prefix }`. Default off. */
  metrics?: boolean | DuraflowMetricsOptions;
  /** How many signals a task keeps for waits to come. */
  signals?: DuraflowSignalOptions;
  /** What a run keeps of its `ctx.log` lines: `{ maxPerTask, maxMessageChars, maxMetadataBytes }`. */
  logs?: DuraflowRunLogOptions;
  /** The bounds of `ctx.writeStream`: `{ maxChunkBytes, maxChunksPerTask }` (defaults 65,536 and 10,000). */
  streams?: DuraflowStreamOptions;
  /**
   * Encryption at rest: every payload (inputs, outputs, errors' details, step outputs, signals,
   * events, streams, callbacks, log metadata) is stored as this codec encodes it
   * (`aesGcmCodec({ keys, current })`). Default: stored as plain JSON.
   */
  codec?: PayloadCodec;
  /**
   * Callback urls (`ctx.createCallback`): `{ baseUrl, secret, path?, maxBodyBytes? }`. Given to
   * `forRoot`, the receiving route is mounted in the app at `path` (docs/talking-to-runs.md).
   * Default: none (createCallback throws CallbacksNotConfiguredError).
   */
  callbacks?: DuraflowCallbackOptions;
  /** Events that start workflows: `{ groupPollIntervalMs, retentionMs }` (defaults 250 ms and 7 days; docs/events.md). */
  events?: DuraflowEventOptions;
}

export interface DuraflowSignalOptions {
  /**
   * Signals a task keeps that no wait has taken yet; a send beyond it is refused with
   * SignalLimitExceededError and writes nothing. Signals a wait took do not count (each is one
   * wait the workflow itself reached), nor does a signal the send hands to a waiting wait at once.
   * Default 1000.
   */
  maxKeptPerTask?: number;
}

const MIB = 1024 * 1024;

/**
 * The default of every option that has one: what `DuraflowModule.forRoot()` runs with. For
 * applications that expose the options under names of their own (environment variables, a
 * config file), so their defaults cannot drift from the library's.
 */
export const DURAFLOW_DEFAULTS = Object.freeze({
  worker: Object.freeze({
    enabled: true,
    concurrency: 100,
    pollIntervalMs: 500,
    maxIdlePollIntervalMs: 30_000,
    prefetch: 'auto' as number | 'auto',
    shutdownTimeoutMs: 10_000,
    /** With the default `reaper.staleAfterMs`; in general `defaultLeaseConfirmAfterMs(staleAfterMs)`. */
    leaseConfirmAfterMs: 10_000,
    backpressure: Object.freeze({ maxQueuedTasks: 1000, maxEventLoopLagMs: 100, lagWindowMs: 1000, slowdownFactor: 4 }),
  }),
  heartbeatIntervalMs: 5_000,
  reaper: Object.freeze({ enabled: true, intervalMs: 10_000, staleAfterMs: 30_000, leaderTtlMs: 30_000, leaderKey: REAPER_LEADER_KEY }),
  retention: Object.freeze({ batchSize: 500, intervalMs: 60_000 }),
  maxRetries: 3,
  maxInputBytes: MIB,
  maxOutputBytes: MIB,
  maxJsonDepth: DEFAULT_MAX_JSON_DEPTH,
  maxListPageBytes: 2 * MIB,
  unknownInputProperties: 'strip' as UnknownInputProperties,
  signals: Object.freeze({ maxKeptPerTask: 1000 }),
});

/** The default of `worker.leaseConfirmAfterMs`: a third of `staleAfterMs`, so a lease is confirmed while two thirds of its life are left. */
export function defaultLeaseConfirmAfterMs(staleAfterMs: number): number {
  return Math.floor(staleAfterMs / 3);
}
