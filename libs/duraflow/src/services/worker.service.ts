import { IntervalHistogram, monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { RESOLVED_DURAFLOW_OPTIONS } from '../duraflow.constants';
import { ResolvedDuraflowOptions } from '../duraflow.options';
import { describeError } from '../util/describe-error';
import { LeaseHeartbeat } from '../execution/lease-heartbeat';
import { RunOutcome, TaskExecutor } from '../execution/task-executor';
import { TaskLease } from '../lease/task-lease';
import { TaskLeases } from '../lease/task-leases';
import { TaskNotifications } from '../notifications/task-notifications';
import { ClaimedTask, TaskStore } from '../persistence/task.store';

export type WorkerState = 'idle' | 'running' | 'stopping' | 'stopped';

export interface WorkerStats {
  workerId: string;
  state: WorkerState;
  concurrency: number;
  /** Tasks this process is running now. */
  running: number;
  /** Since start, by outcome. */
  claimed: number;
  completed: number;
  failed: number;
  /** Runs that failed and were undone by the saga (every compensation succeeded). */
  rolledBack: number;
  /** Runs that failed and were undone in part (a compensation went to the dead-letter queue). */
  partialRollback: number;
  /** Rollbacks of cancelled tasks this worker finished (after a crash of the canceller). */
  cancelled: number;
  /** Runs stopped by cancellation, takeover or shutdown, and tasks claimed ahead that were handed back unstarted. */
  stopped: number;
  /** Runs whose outcome could not be written (the database was unreachable). */
  unrecorded: number;
  /** The LISTEN connection is up (otherwise only polling wakes the worker). */
  listening: boolean;
  backpressure: BackpressureStats;
  workflows: string[];
}

const OUTCOME_COUNTER: Record<RunOutcome, 'completed' | 'failed' | 'rolledBack' | 'partialRollback' | 'cancelled' | 'stopped' | 'unrecorded'> = {
  completed: 'completed',
  failed: 'failed',
  rolled_back: 'rolledBack',
  partial_rollback: 'partialRollback',
  cancelled: 'cancelled',
  stopped: 'stopped',
  unrecorded: 'unrecorded',
};

export interface BackpressureStats {
  /** Tasks this process holds now (running, or claimed and waiting for a slot). */
  queued: number;
  /** Of those, claimed ahead (`worker.prefetch`) and waiting for a slot. */
  waiting: number;
  /** How many tasks it claims ahead of its free slots now (with `prefetch: 'auto'`, `concurrency` or 0). */
  prefetch: number;
  maxQueued: number;
  /** `queued` reached `maxQueuedTasks`: polling has stopped until tasks finish. */
  queueFull: boolean;
  /** The longest event loop delay in the last complete window, in ms. */
  eventLoopLagMs: number;
  /** `eventLoopLagMs` is over `maxEventLoopLagMs`: polling is slowed down. */
  lagging: boolean;
  /** The poll interval in force now. */
  pollIntervalMs: number;
}

interface RunningTask {
  lease: TaskLease;
  done: Promise<void>;
  /** When its code started running (it holds a slot), in `performance.now()` time. */
  startedAt?: number;
}

/** A claimed task waiting for a slot. */
interface WaitingTask {
  lease: TaskLease;
  start: () => void;
  /** When it was claimed, in `performance.now()` time. */
  since: number;
}

/** With `prefetch: 'auto'`, runs shorter than this (on average, and none running longer) make it claim ahead. */
const AUTO_PREFETCH_SHORT_RUN_MS = 50;
/** With `prefetch: 'auto'`, a task claimed ahead that waited this long for a slot goes back to pending. */
const AUTO_PREFETCH_MAX_WAIT_MS = 500;

/**
 * Claims tasks of the workflows this process registers and runs up to `concurrency` at
 * once. Woken by NOTIFY on submit, with a poll as the fallback; heartbeats its running
 * tasks in one statement per tick. On shutdown it stops claiming, lets running tasks
 * finish for `shutdownTimeoutMs`, then hands the rest back to `pending`.
 */
@Injectable()
export class WorkerService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Duraflow');
  private readonly running = new Map<string, RunningTask>();
  private readonly counters = {
    claimed: 0,
    completed: 0,
    failed: 0,
    rolledBack: 0,
    partialRollback: 0,
    cancelled: 0,
    stopped: 0,
    unrecorded: 0,
  };
  private state: WorkerState = 'idle';
  /** Runs whose code is running now: each holds one of the `concurrency` slots. */
  private executing = 0;
  /** Claimed tasks waiting for a slot (at most `prefetch`), oldest first. */
  private readonly waiting: WaitingTask[] = [];
  /** Moving average of how long this process's runs hold a slot (undefined before the first). */
  private averageRunMs: number | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private lagTimer: NodeJS.Timeout | undefined;
  private lagHistogram: IntervalHistogram | undefined;
  private eventLoopLagMs = 0;
  private lagging = false;
  private claimLoop: Promise<void> | undefined;
  private claimRequested = false;
  private claimFailing = false;
  private unsubscribe: Array<() => void> = [];
  private stopping: Promise<void> | undefined;

  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly registry: WorkflowRegistry,
    private readonly tasks: TaskStore,
    private readonly executor: TaskExecutor,
    private readonly leases: TaskLeases,
    private readonly notifications: TaskNotifications,
    private readonly heartbeat: LeaseHeartbeat,
  ) {}

  /** This process's worker id: written to `agent_tasks.worker_id` on every claim. */
  get workerId(): string {
    return this.options.workerId;
  }

  onApplicationBootstrap(): Promise<void> | void {
    if (this.options.worker.enabled) return this.start();
  }

  beforeApplicationShutdown(): Promise<void> {
    return this.stop();
  }

  /** Starts claiming (called on bootstrap unless `worker.enabled` is false). */
  async start(): Promise<void> {
    if (this.state === 'running') return;
    if (this.state === 'stopping') await this.stopping;
    this.state = 'running';
    const names = new Set(this.registry.names());
    this.unsubscribe = [
      this.notifications.onSubmitted((workflowName) => {
        if (names.has(workflowName) && !this.lagging) this.requestClaim();
      }),
      this.notifications.onFinished((taskId) => this.running.get(taskId)?.lease.stop('cancelled')),
    ];
    await this.notifications.ensureListening();
    this.startLagMonitor();
    this.schedulePoll();
    this.logger.log(
      `Worker ${this.workerId} started (concurrency ${this.options.worker.concurrency}, workflows: ${[...names].join(', ') || 'none'})`,
    );
    this.requestClaim();
  }

  /** Stops claiming, waits for running tasks up to `shutdownTimeoutMs`, hands back the rest. */
  stop(): Promise<void> {
    if (this.state !== 'running') return this.stopping ?? Promise.resolve();
    this.state = 'stopping';
    this.stopping = this.drainAndStop().finally(() => {
      this.state = 'stopped';
    });
    return this.stopping;
  }

  stats(): WorkerStats {
    return {
      workerId: this.workerId,
      state: this.state,
      concurrency: this.options.worker.concurrency,
      running: this.running.size,
      ...this.counters,
      listening: this.notifications.listening,
      backpressure: {
        queued: this.running.size,
        waiting: this.waiting.length,
        prefetch: this.prefetch,
        maxQueued: this.options.worker.backpressure.maxQueuedTasks,
        queueFull: this.running.size >= this.options.worker.backpressure.maxQueuedTasks,
        eventLoopLagMs: this.eventLoopLagMs,
        lagging: this.lagging,
        pollIntervalMs: this.pollIntervalMs,
      },
      workflows: this.registry.names(),
    };
  }

  /** The poll interval in force: slower while the event loop lags. */
  private get pollIntervalMs(): number {
    const { pollIntervalMs, backpressure } = this.options.worker;
    return this.lagging ? pollIntervalMs * backpressure.slowdownFactor : pollIntervalMs;
  }

  /**
   * Tasks to claim ahead of the free slots now. With 'auto': `concurrency` while the runs are
   * short (a task claimed ahead then waits about one short run), none once they are not.
   */
  private get prefetch(): number {
    const { prefetch, concurrency } = this.options.worker;
    if (prefetch !== 'auto') return prefetch;
    if (this.averageRunMs === undefined || this.averageRunMs >= AUTO_PREFETCH_SHORT_RUN_MS) return 0;
    const longAgo = performance.now() - AUTO_PREFETCH_SHORT_RUN_MS;
    for (const run of this.running.values()) if (run.startedAt !== undefined && run.startedAt < longAgo) return 0;
    return concurrency;
  }

  /**
   * With 'auto': tasks claimed ahead that have waited 500 ms for a slot
   * (the runs turned long) go back to `pending`, for a worker with a free slot. Checked on every
   * poll and every lag window, so a long poll interval does not hold them longer.
   */
  private handBackLongWaiting(): void {
    if (this.options.worker.prefetch !== 'auto' || !this.waiting.length) return;
    // `waiting` is in claim order: the ones that waited longest are at its head.
    const waitedSince = performance.now() - AUTO_PREFETCH_MAX_WAIT_MS;
    const fresh = this.waiting.findIndex((entry) => entry.since > waitedSince);
    const count = fresh < 0 ? this.waiting.length : fresh;
    if (count) void this.handBackWaiting(this.waiting.splice(0, count), 'handed-back', 'that waited too long for a slot');
  }

  /** Hands back tasks claimed ahead that never started; their runs then end at once, running nothing. */
  private async handBackWaiting(entries: WaitingTask[], reason: 'handed-back' | 'shutdown', why: string): Promise<void> {
    for (const { lease } of entries) lease.stop(reason);
    await this.handBack(
      entries.map(({ lease }) => lease),
      why,
    );
    for (const { start } of entries) {
      this.executing++; // the slot its run gives back when it ends
      start();
    }
  }

  private schedulePoll(): void {
    this.pollTimer = setTimeout(() => {
      this.handBackLongWaiting();
      this.requestClaim();
      if (this.state === 'running') this.schedulePoll();
    }, this.pollIntervalMs);
  }

  /** Event loop lag per window, not over the process lifetime: a process that lags now polls less often now. */
  private startLagMonitor(): void {
    const { lagWindowMs, maxEventLoopLagMs } = this.options.worker.backpressure;
    const histogram = monitorEventLoopDelay({ resolution: 10 });
    histogram.enable();
    this.lagHistogram = histogram;
    this.lagTimer = setInterval(() => {
      this.handBackLongWaiting();
      this.eventLoopLagMs = Math.round(histogram.max / 1e6);
      histogram.reset();
      const lagging = this.eventLoopLagMs > maxEventLoopLagMs;
      if (lagging !== this.lagging) {
        this.logger.warn(
          lagging
            ? `Event loop lag ${this.eventLoopLagMs} ms (over ${maxEventLoopLagMs} ms): polling every ${this.options.worker.pollIntervalMs * this.options.worker.backpressure.slowdownFactor} ms`
            : `Event loop lag back to ${this.eventLoopLagMs} ms: polling every ${this.options.worker.pollIntervalMs} ms`,
        );
      }
      this.lagging = lagging;
    }, lagWindowMs);
    this.lagTimer.unref();
  }

  private stopLagMonitor(): void {
    clearInterval(this.lagTimer);
    this.lagHistogram?.disable();
    this.lagHistogram = undefined;
    this.lagging = false;
  }

  private async drainAndStop(): Promise<void> {
    clearTimeout(this.pollTimer);
    this.stopLagMonitor();
    for (const unsubscribe of this.unsubscribe) unsubscribe();
    await this.claimLoop;
    // Tasks claimed ahead and not started go back at once; they never start here.
    const notStarted = this.waiting.splice(0);
    if (notStarted.length) await this.handBackWaiting(notStarted, 'shutdown', 'on shutdown');
    const finished = Promise.all([...this.running.values()].map((run) => run.done));
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      finished.then(() => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), this.options.worker.shutdownTimeoutMs))),
    ]);
    clearTimeout(timer);
    if (timedOut && this.running.size) {
      const leases = [...this.running.values()].map((run) => run.lease);
      for (const lease of leases) lease.stop('shutdown');
      await this.handBack(leases, 'on shutdown');
      await Promise.race([finished, new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
    }
    this.logger.log(`Worker ${this.workerId} stopped`);
  }

  /** Hands tasks back to `pending` without counting a retry. Never throws. */
  private async handBack(leases: TaskLease[], why: string): Promise<void> {
    try {
      const released = await this.tasks.releaseTasks(
        leases.map((lease) => lease.taskId),
        leases.map((lease) => lease.claimToken),
      );
      this.logger.log(`Handed ${released.length} unfinished task(s) back to pending ${why}`);
    } catch (error) {
      this.logger.warn(`Could not hand tasks back ${why} (${describeError(error).message}); the reaper will recover them`);
    }
  }

  private requestClaim(): void {
    if (this.state !== 'running') return;
    if (this.claimLoop) {
      this.claimRequested = true;
      return;
    }
    // While runs are going, claim one turn later: the runs that end in this turn free their
    // slots first, so one claim fills them all. An idle worker (a submit woke it) claims at once.
    const turn = this.executing > 0 ? new Promise<void>((resolve) => setImmediate(resolve)) : Promise.resolve();
    this.claimLoop = turn
      .then(() => this.claimWhileFree())
      .finally(() => {
        this.claimLoop = undefined;
        if (this.claimRequested) {
          this.claimRequested = false;
          this.requestClaim();
        }
      });
  }

  /** Claims until the pool is full or the queue has nothing more for this worker. */
  private async claimWhileFree(): Promise<void> {
    while (this.state === 'running') {
      const { concurrency, backpressure } = this.options.worker;
      // Claim for the free slots and for the prefetch queue: a busy worker claims ahead, so
      // the next task starts without a round trip (runs whose code is over hold no slot).
      const held = this.executing + this.waiting.length;
      const free = Math.min(concurrency + this.prefetch - held, backpressure.maxQueuedTasks - this.running.size);
      if (free <= 0) return;
      let claimed: ClaimedTask[];
      try {
        claimed = await this.tasks.claimTasks(this.workerId, this.registry.names(), free);
      } catch (error) {
        if (!this.claimFailing) this.logger.warn(`Claiming tasks failed (${describeError(error).message}); retrying on the next poll`);
        this.claimFailing = true;
        return;
      }
      if (this.claimFailing) this.logger.log('Claiming tasks works again');
      this.claimFailing = false;
      for (const task of claimed) this.runTask(task);
      if (claimed.length < free) return;
    }
  }

  private runTask(claimed: ClaimedTask): void {
    const lease = this.leases.open(claimed.task.id, claimed.claimToken);
    const run: RunningTask = { lease, done: Promise.resolve() };
    let holdsSlot = false;
    const freeSlot = () => {
      if (!holdsSlot) return;
      holdsSlot = false;
      this.executing--;
      if (run.startedAt !== undefined) {
        const ms = performance.now() - run.startedAt;
        this.averageRunMs = this.averageRunMs === undefined ? ms : this.averageRunMs * 0.8 + ms * 0.2;
        run.startedAt = undefined;
      }
      this.startWaiting();
    };
    lease.onRecording = () => {
      freeSlot(); // its completion is being written: the next task may start meanwhile
      this.requestClaim();
    };
    this.counters.claimed++;
    const slot = new Promise<void>((start) => this.waiting.push({ lease, start, since: performance.now() }));
    run.done = slot
      .then((): Promise<RunOutcome> | RunOutcome => {
        holdsSlot = true;
        // Stopped while it waited (cancelled, lost, handed back): it never runs.
        if (lease.stoppedBecause) return 'stopped';
        run.startedAt = performance.now();
        return this.executor.execute(claimed, lease);
      })
      .catch((error): RunOutcome => {
        this.logger.error(`Task ${claimed.task.id} could not run: ${describeError(error).message}`);
        return 'unrecorded';
      })
      .then((outcome) => {
        this.counters[OUTCOME_COUNTER[outcome]]++;
        freeSlot();
        this.heartbeat.release(lease);
        // A re-claim of the same task may already hold the slot: only remove this run's own.
        if (this.running.get(claimed.task.id)?.lease === lease) this.running.delete(claimed.task.id);
        this.requestClaim();
      });
    this.running.set(claimed.task.id, run);
    this.heartbeat.hold(lease);
    this.startWaiting();
  }

  /** Starts waiting tasks while slots are free. */
  private startWaiting(): void {
    while (this.executing < this.options.worker.concurrency && this.waiting.length) {
      this.executing++;
      this.waiting.shift()!.start();
    }
  }
}
