import { performance } from 'node:perf_hooks';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { RunOutcome } from '../domain/run-outcome';
import { TaskExecutor } from '../execution/task-executor';
import { FlowLimitStats } from '../domain/flow-control';
import { WorkerState, WorkerStats } from '../domain/worker-stats';
import { TaskLease } from '../lease/task-lease';
import { TaskLeases } from '../lease/task-leases';
import { TaskNotifications } from '../notifications/task-notifications';
import { RunObserver } from '../observability/run-observer';
import { DuraflowLogger } from '../observability/duraflow-logger';
import { ClaimedTask } from '../persistence/lifecycle/claim-tasks';
import { TaskTransitions } from '../persistence/lifecycle/task-transitions';
import { describeError } from '../util/describe-error';
import { BackpressureMonitor } from './backpressure-monitor';
import { IdlePoll } from './idle-poll';
import { RunCounters } from './run-counters';
import { LeaseHeartbeat } from './lease-heartbeat';
import { NodeIdentity } from './node-identity';
import { SlotPool, TakenTask } from './slot-pool';
import { TaskClaimer } from './task-claimer';
import { WakeUpTimer } from '../notifications/wake-up-timer';

/**
 * The worker's loop: claims tasks of the workflows this process registers into its slot pool
 * and runs them. Woken by NOTIFY on submit (unless the event loop lags), by its slot pool
 * when a slot frees, and by a poll as the fallback (and for `scheduledAt`); each wake-up
 * claims for the free slots and the prefetch queue in one statement. Hears cancels through
 * NOTIFY (a run's own final status is not one). Idle (nothing held, nothing claimed, no NOTIFY
 * heard, LISTEN up), the poll backs off: doubling from `pollIntervalMs` up to
 * `maxIdlePollIntervalMs`, back to `pollIntervalMs` on any NOTIFY or claimed task. On stop it claims no more, hands the tasks
 * claimed ahead back at once, lets running tasks finish for `shutdownTimeoutMs`, then hands
 * the rest back to `pending`. Every task it holds is heartbeated (LeaseHeartbeat).
 */
@Injectable()
export class WorkerLoop {
  private readonly logger = new Logger('Duraflow');
  private readonly taskLogger = new DuraflowLogger();
  private readonly counters = new RunCounters();
  private readonly pool: SlotPool;
  private readonly backpressure: BackpressureMonitor;
  private state: WorkerState = 'idle';
  private readonly idlePoll: IdlePoll;
  private claimLoop: Promise<void> | undefined;
  private claimRequested = false;
  private claimFailing = false;
  private unsubscribe: Array<() => void> = [];
  private stopping: Promise<void> | undefined;

  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly registry: WorkflowRegistry,
    private readonly transitions: TaskTransitions,
    private readonly executor: TaskExecutor,
    private readonly leases: TaskLeases,
    private readonly notifications: TaskNotifications,
    private readonly heartbeat: LeaseHeartbeat,
    private readonly observer: RunObserver,
    private readonly claimer: TaskClaimer,
    private readonly wakeUps: WakeUpTimer,
    private readonly identity: NodeIdentity,
  ) {
    const { concurrency, prefetch } = options.worker;
    this.pool = new SlotPool({ concurrency, prefetch });
    this.backpressure = new BackpressureMonitor(options.worker, this.logger);
    this.idlePoll = new IdlePoll({
      intervalMs: () => this.backpressure.pollIntervalMs,
      maxIdleIntervalMs: options.worker.maxIdlePollIntervalMs,
      quiet: () => this.pool.size === 0 && this.notifications.listening,
      poll: () => {
        this.handBackLongWaiting();
        this.claimer.polled();
        this.requestClaim();
      },
    });
    this.pool.onSlotFreed(() => this.requestClaim());
    this.pool.onEnded((lease, outcome) => {
      this.counters.ended(outcome);
      this.heartbeat.release(lease);
      this.claimer.mayHaveRoom();
      this.requestClaim();
    });
  }

  async start(): Promise<void> {
    if (this.state === 'running') return;
    if (this.state === 'stopping') await this.stopping;
    this.state = 'running';
    const names = new Set(this.registry.names());
    await this.claimer.prepare();
    this.unsubscribe = [
      this.notifications.onSubmitted((workflowName) => {
        this.noteActivity();
        if (!names.has(workflowName)) return;
        this.claimer.mayHaveRoom();
        if (!this.backpressure.lagging) this.requestClaim();
      }),
      this.notifications.onFinished((taskId) => {
        this.noteActivity();
        const lease = this.pool.lease(taskId);
        // A run that writes its own final status hears its own NOTIFY: that is no cancel.
        if (lease && !lease.writingOutcome) lease.stop('cancelled');
        // A task ended somewhere: the limit that held a task back here may have a free slot now.
        else if (!lease && this.claimer.heldBack) {
          this.claimer.mayHaveRoom();
          if (!this.backpressure.lagging) this.requestClaim();
        }
      }),
      // A task this process suspended until a time (a sleep, a signal's timeout) is due: claim it now.
      this.wakeUps.onWake(() => this.requestClaim()),
      this.notifications.onListenLost(() => this.noteActivity()),
      this.identity.onRegained(() => this.requestClaim()),
    ];
    await this.notifications.ensureListening();
    this.backpressure.start(() => this.handBackLongWaiting());
    this.idlePoll.start();
    this.logger.log(
      `Worker ${this.options.workerId} started (concurrency ${this.options.worker.concurrency}, workflows: ${this.registry.describe().join(', ') || 'none'})`,
    );
    this.requestClaim();
  }

  stop(): Promise<void> {
    if (this.state !== 'running') return this.stopping ?? Promise.resolve();
    this.state = 'stopping';
    this.stopping = this.drainAndStop().finally(() => {
      this.state = 'stopped';
    });
    return this.stopping;
  }

  stats(): WorkerStats {
    const held = this.pool.size;
    return {
      workerId: this.options.workerId,
      state: this.state,
      concurrency: this.options.worker.concurrency,
      running: held,
      ...this.counters.snapshot(),
      listening: this.notifications.listening,
      backpressure: {
        queued: held,
        waiting: this.pool.waiting,
        prefetch: this.pool.prefetch,
        maxQueued: this.options.worker.backpressure.maxQueuedTasks,
        queueFull: this.backpressure.queueFull(held),
        eventLoopLagMs: this.backpressure.eventLoopLagMs,
        lagging: this.backpressure.lagging,
        pollIntervalMs: this.backpressure.pollIntervalMs,
      },
      workflows: this.registry.names(),
      limits: this.claimer.limitStats(),
    };
  }

  /** What waits on the flow limits of this process's workflows, read now. */
  readLimits(): Promise<FlowLimitStats[]> {
    return this.claimer.readLimitStats();
  }

  /** Checked on every poll and every lag window, so a long poll interval does not hold them longer. */
  private handBackLongWaiting(): void {
    const taken = this.pool.takeLongWaiting();
    if (taken.length) void this.handBackUnstarted(taken, 'handed-back', 'that waited too long for a slot');
  }

  /** Hands back tasks claimed ahead that never started; their runs then end at once, running nothing. */
  private async handBackUnstarted(taken: TakenTask[], reason: 'handed-back' | 'shutdown', why: string): Promise<void> {
    for (const { lease } of taken) lease.stop(reason);
    await this.handBack(
      taken.map(({ lease }) => lease),
      why,
    );
    for (const task of taken) task.dismiss();
  }

  /** A NOTIFY, a claim, or LISTEN lost: the poll goes back to its interval at once. */
  private noteActivity(): void {
    this.idlePoll.noteActivity();
  }

  private async drainAndStop(): Promise<void> {
    this.idlePoll.stop();
    this.backpressure.stop();
    for (const unsubscribe of this.unsubscribe) unsubscribe();
    await this.claimLoop;
    // Tasks claimed ahead and not started go back at once; they never start here.
    const notStarted = this.pool.takeWaiting();
    if (notStarted.length) await this.handBackUnstarted(notStarted, 'shutdown', 'on shutdown');
    const finished = this.pool.allEnded();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      finished.then(() => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), this.options.worker.shutdownTimeoutMs))),
    ]);
    clearTimeout(timer);
    if (timedOut && this.pool.size) {
      const leases = this.pool.leases();
      for (const lease of leases) lease.stop('shutdown');
      await this.handBack(leases, 'on shutdown');
      await Promise.race([finished, new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
    }
    this.logger.log(`Worker ${this.options.workerId} stopped`);
  }

  /** Hands tasks back to `pending` without counting a retry. Never throws. */
  private async handBack(leases: TaskLease[], why: string): Promise<void> {
    try {
      const released = await this.transitions.release(
        leases.map((lease) => lease.taskId),
        leases.map((lease) => lease.claimToken),
      );
      this.taskLogger.log(`Handed ${released.length} unfinished task(s) back to pending ${why}`, { taskIds: released });
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
    const turn = this.pool.busy ? new Promise<void>((resolve) => setImmediate(resolve)) : Promise.resolve();
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
      // Claim for the free slots and for the prefetch queue: a busy worker claims ahead, so
      // the next task starts without a round trip.
      const free = Math.min(this.pool.wanted, this.backpressure.room(this.pool.size));
      // With a node id, only while this process holds the node's lock (confirmed after a freeze).
      if (free <= 0 || !(await this.identity.mayClaim())) return;
      let claimed: ClaimedTask[];
      const claimStarted = performance.now();
      // The claim stamps heartbeat_at after this: its leases are at least this old.
      const claimedAt = claimStarted;
      try {
        claimed = await this.claimer.claim(this.options.workerId, free);
        this.observer.metrics.claimed((performance.now() - claimStarted) / 1000, claimed.map(claimWait));
      } catch (error) {
        this.observer.metrics.claimFailed();
        if (!this.claimFailing) this.logger.warn(`Claiming tasks failed (${describeError(error).message}); retrying on the next poll`);
        this.claimFailing = true;
        return;
      }
      if (this.claimFailing) this.logger.log('Claiming tasks works again');
      this.claimFailing = false;
      if (claimed.length) this.noteActivity();
      for (const task of claimed) this.admit(task, claimedAt);
      if (claimed.length < free) return;
    }
  }

  private admit(claimed: ClaimedTask, claimedAt: number): void {
    const lease = this.leases.open(claimed.task.id, claimed.claimToken, claimedAt);
    this.counters.claimed();
    this.pool.admit(lease, (slot) =>
      this.observer
        .observe(claimed, lease, () => this.executor.execute(claimed, lease, slot))
        .catch((error): RunOutcome => {
          this.taskLogger.error(`Task ${claimed.task.id} could not run: ${describeError(error).message}`, {
            taskId: claimed.task.id,
            workflow: claimed.task.workflowName,
          });
          return 'unrecorded';
        }),
    );
    this.heartbeat.hold(lease);
  }
}

/** How long a task claimed for the first time had been runnable (null for a task claimed again). */
function claimWait({ task, fresh }: ClaimedTask): { workflowName: string; waitedSeconds: number | null } {
  if (!fresh || !task.startedAt) return { workflowName: task.workflowName, waitedSeconds: null };
  const runnableSince = Math.max(task.createdAt.getTime(), task.scheduledAt?.getTime() ?? 0);
  return { workflowName: task.workflowName, waitedSeconds: (task.startedAt.getTime() - runnableSince) / 1000 };
}
