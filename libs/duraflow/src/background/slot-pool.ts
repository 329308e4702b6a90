import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import { RunOutcome } from '../domain/run-outcome';
import { RunSlot } from '../execution/run-outcomes';
import { TaskLease } from '../lease/task-lease';

/** With `prefetch: 'auto'`, runs shorter than this (on average, and none running longer) make the worker claim ahead. */
const AUTO_PREFETCH_SHORT_RUN_MS = 50;
/** With `prefetch: 'auto'`, a task claimed ahead that waited this long for a slot is taken back to be handed back. */
const AUTO_PREFETCH_MAX_WAIT_MS = 500;

export interface SlotPoolOptions {
  /** Runs at once. */
  concurrency: number;
  /** Tasks to claim ahead of the free slots: a number, or `'auto'`. */
  prefetch: number | 'auto';
}

/** A task the pool holds, from its claim to the end of its run. */
interface HeldTask {
  lease: TaskLease;
  stage: 'waiting' | 'running' | 'recording';
  /** While it runs: when it took its slot, in `performance.now()` time. */
  startedAt?: number;
  done: Promise<void>;
}

/** A task taken out of the queue before it started: hand it back to `pending`, then `dismiss()` it (it ends `stopped`). */
export interface TakenTask {
  lease: TaskLease;
  dismiss(): void;
}

/** A task in the waiting queue: `start(true)` gives it a slot, `start(false)` ends it unstarted. */
interface QueuedTask {
  task: HeldTask;
  start: (withSlot: boolean) => void;
  /** When it was claimed, in `performance.now()` time. */
  since: number;
}

/**
 * The slots of one worker: how many of its claimed tasks run at once, and the queue of those
 * claimed ahead of a free slot.
 *
 * Each task the pool holds is in one of three stages:
 * - `waiting`: claimed, in the queue (oldest first), holding no slot;
 * - `running`: holding one of the `concurrency` slots while its code runs;
 * - `recording`: its code is over and its outcome is being written; its slot is free again.
 *
 * Moves:
 * - `admit` → waiting (the worker claimed it);
 * - waiting → running, oldest first, as soon as a slot is free;
 * - waiting → ended `stopped`: stopped while it waited (it takes its slot only to give it back),
 *   or taken out of the queue (`takeWaiting`, `takeLongWaiting`) and dismissed once the worker
 *   has handed it back to `pending`;
 * - running → recording: the run calls `slot.release()` (event `slot-freed`);
 * - running or recording → ended: its run settled (event `ended`, with the outcome).
 *
 * Prefetch: with a number, the pool asks for that many tasks beyond its free slots. With
 * `'auto'`, `concurrency` of them while this process's runs are short (averaging under 50 ms,
 * none running longer), so the next task starts without a round trip, and none once they are
 * not; a task claimed ahead that waited 500 ms for a slot (the runs turned long) is taken back.
 */
export class SlotPool {
  private readonly held = new Map<string, HeldTask>();
  private readonly queue: QueuedTask[] = [];
  private readonly events = new EventEmitter();
  /** Tasks in the `running` stage: the slots in use. */
  private runningCount = 0;
  /** Moving average of how long this process's runs hold a slot (undefined before the first). */
  private averageRunMs: number | undefined;

  constructor(private readonly options: SlotPoolOptions) {}

  /** A running task gave its slot back before its run ended (its outcome is being written). */
  onSlotFreed(listener: () => void): void {
    this.events.on('slot-freed', listener);
  }

  /** A task left the pool: its run ended, or it ended without running (stopped or handed back while it waited). */
  onEnded(listener: (lease: TaskLease, outcome: RunOutcome) => void): void {
    this.events.on('ended', listener);
  }

  /** Tasks held, in every stage. */
  get size(): number {
    return this.held.size;
  }

  /** Tasks in the waiting queue. */
  get waiting(): number {
    return this.queue.length;
  }

  /** Some task holds a slot now. */
  get busy(): boolean {
    return this.runningCount > 0;
  }

  /**
   * Tasks to claim ahead of the free slots now. With 'auto': `concurrency` while the runs are
   * short (a task claimed ahead then waits about one short run), none once they are not.
   */
  get prefetch(): number {
    const { prefetch, concurrency } = this.options;
    if (prefetch !== 'auto') return prefetch;
    if (this.averageRunMs === undefined || this.averageRunMs >= AUTO_PREFETCH_SHORT_RUN_MS) return 0;
    const longAgo = performance.now() - AUTO_PREFETCH_SHORT_RUN_MS;
    for (const task of this.held.values()) if (task.startedAt !== undefined && task.startedAt < longAgo) return 0;
    return concurrency;
  }

  /** How many tasks the pool would take now: its free slots and the room left in its queue (runs whose code is over hold no slot). */
  get wanted(): number {
    return this.options.concurrency + this.prefetch - (this.runningCount + this.queue.length);
  }

  /** The lease of the held task `taskId`. */
  lease(taskId: string): TaskLease | undefined {
    return this.held.get(taskId)?.lease;
  }

  /** The leases of every held task. */
  leases(): TaskLease[] {
    return [...this.held.values()].map((task) => task.lease);
  }

  /** Resolves once every task held now has ended. */
  async allEnded(): Promise<void> {
    await Promise.all([...this.held.values()].map((task) => task.done));
  }

  /** A claimed task joins the queue; `run` starts it once it has a slot, unless its lease stopped meanwhile. */
  admit(lease: TaskLease, run: (slot: RunSlot) => Promise<RunOutcome>): void {
    const task: HeldTask = { lease, stage: 'waiting', done: Promise.resolve() };
    const turn = new Promise<boolean>((start) => this.queue.push({ task, start, since: performance.now() }));
    task.done = turn
      .then((withSlot): Promise<RunOutcome> | RunOutcome => {
        // Stopped while it waited (cancelled, lost, handed back): it never runs.
        if (!withSlot || lease.stoppedBecause) return 'stopped';
        task.startedAt = performance.now();
        return run({
          release: () => {
            if (this.freeSlot(task)) this.events.emit('slot-freed');
          },
        });
      })
      .then((outcome) => this.end(task, outcome));
    this.held.set(lease.taskId, task);
    this.fill();
  }

  /** Takes every waiting task out of the queue (shutdown). */
  takeWaiting(): TakenTask[] {
    return this.take(this.queue.length);
  }

  /**
   * With 'auto': takes out of the queue the tasks claimed ahead that have waited 500 ms for a
   * slot (the runs turned long), to be handed back to `pending` for a worker with a free slot.
   */
  takeLongWaiting(): TakenTask[] {
    if (this.options.prefetch !== 'auto' || !this.queue.length) return [];
    // The queue is in claim order: the ones that waited longest are at its head.
    const waitedSince = performance.now() - AUTO_PREFETCH_MAX_WAIT_MS;
    const fresh = this.queue.findIndex((entry) => entry.since > waitedSince);
    return this.take(fresh < 0 ? this.queue.length : fresh);
  }

  private take(count: number): TakenTask[] {
    return this.queue.splice(0, count).map(({ task, start }) => ({ lease: task.lease, dismiss: () => start(false) }));
  }

  /** Starts waiting tasks while slots are free. */
  private fill(): void {
    while (this.runningCount < this.options.concurrency && this.queue.length) {
      const { task, start } = this.queue.shift()!;
      this.runningCount++;
      task.stage = 'running';
      start(true);
    }
  }

  /** The task gives its slot back, once: the next one may start. False when it held none. */
  private freeSlot(task: HeldTask): boolean {
    if (task.stage !== 'running') return false;
    task.stage = 'recording';
    this.runningCount--;
    if (task.startedAt !== undefined) {
      const ms = performance.now() - task.startedAt;
      this.averageRunMs = this.averageRunMs === undefined ? ms : this.averageRunMs * 0.8 + ms * 0.2;
      task.startedAt = undefined;
    }
    this.fill();
    return true;
  }

  private end(task: HeldTask, outcome: RunOutcome): void {
    this.freeSlot(task);
    // A re-claim of the same task may be held already: only remove this run's own.
    if (this.held.get(task.lease.taskId) === task) this.held.delete(task.lease.taskId);
    this.events.emit('ended', task.lease, outcome);
  }
}
