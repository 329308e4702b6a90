import { Inject, Injectable, Logger } from '@nestjs/common';
import { DURAFLOW_CLOCK, DuraflowClock } from '../domain/engine-clock';
import { describeError } from '../util/describe-error';
import { ScheduleRegistry, RegisteredSchedule } from './schedule.registry';
import { ScheduleStore } from './schedule.store';

/** The longest delay a Node timer takes (about 24.8 days); a tick further off is reached by re-arming. */
const MAX_TIMER_MS = 2_147_483_647;
/** After a failed write (database down), the schedule tries again this soon, or at its next tick if sooner. */
const RETRY_AFTER_FAILURE_MS = 1_000;

/**
 * Ticks this node's schedules: one timer per schedule, armed for its next tick.
 *
 * States: stopped -> booting (definitions saved, then each schedule's boot wake-up: the catch-up)
 * -> running (each wake-up starts what is due and arms the timer again) -> stopped (timers
 * cleared, the wake-ups under way awaited). Started and stopped with the worker (WorkerService):
 * schedules tick on every node whose worker runs, and every such node tries every tick; the
 * database lets one task in per tick (ScheduleStore.startTick).
 *
 * A wake-up looks at the ticks due since the last one this node handled (at boot: since the
 * newest tick any node did, `last_tick_at`), at most `maxCatchUp` of them for `'all'`:
 * - at boot they were all missed while no node ran the schedule: `'latest'` starts the newest,
 *   `'all'` each (oldest first), `'none'` none;
 * - while running, the newest is the tick the timer was armed for and always starts; older ones
 *   (this node stalled past them) start only with `'all'` (another node running did them anyway).
 * Ticks not started are recorded as done (`last_tick_at`), so a restart does not count them again.
 */
@Injectable()
export class ScheduleTicker {
  private readonly logger = new Logger('Duraflow');
  private running = false;
  /** Per schedule: the time up to which this node has handled its ticks. */
  private readonly handledUpTo = new Map<string, Date>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly wakeUps = new Set<Promise<void>>();
  /** Per schedule, until its boot wake-up succeeds: the time after which ticks were missed while no node ran it. */
  private readonly bootSince = new Map<string, Date | null>();
  private bootTimer: NodeJS.Timeout | undefined;
  private readonly failing = new Set<string>();

  constructor(
    private readonly registry: ScheduleRegistry,
    private readonly store: ScheduleStore,
    @Inject(DURAFLOW_CLOCK) private readonly clock: DuraflowClock,
  ) {}

  /** Saves the definitions and catches up, then arms the timers. Never throws: a database error is logged and retried. */
  async start(): Promise<void> {
    if (this.running || !this.registry.all().length) return;
    this.running = true;
    await this.boot();
  }

  /** Clears the timers and waits for the wake-ups under way: no task is started after it resolves. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    clearTimeout(this.bootTimer);
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    await Promise.all([...this.wakeUps]);
    this.handledUpTo.clear();
    this.bootSince.clear();
  }

  /** The earliest next tick of this node's schedules, by the engine's clock (undefined: none, or not running). */
  nextTick(): Date | undefined {
    if (!this.running) return undefined;
    let next: Date | undefined;
    for (const schedule of this.registry.all()) {
      const tick = schedule.cron.nextAfter(this.handledUpTo.get(schedule.name) ?? new Date(this.clock.now()));
      if (tick && (!next || tick < next)) next = tick;
    }
    return next;
  }

  /** Wakes every schedule now (the engine's clock moved, as the testing kit moves it): what is due starts, the timers are armed again. */
  async wakeAll(): Promise<void> {
    if (!this.running) return;
    await Promise.all([...this.wakeUps]);
    for (const schedule of this.registry.all()) {
      if (this.bootSince.has(schedule.name)) continue;
      clearTimeout(this.timers.get(schedule.name));
      this.timers.delete(schedule.name);
      await this.track(this.wake(schedule));
    }
  }

  private async boot(): Promise<void> {
    const schedules = this.registry.all();
    try {
      const since = await this.store.saveDefinitions(schedules);
      for (const schedule of schedules) this.bootSince.set(schedule.name, since.get(schedule.name) ?? null);
    } catch (error) {
      this.logger.warn(
        `Could not save the schedules (${describeError(error).message}); trying again in ${RETRY_AFTER_FAILURE_MS} ms. ` +
          `Have the Duraflow migrations been run?`,
      );
      if (this.running) this.bootTimer = setTimeout(() => void this.boot(), RETRY_AFTER_FAILURE_MS);
      return;
    }
    await Promise.all(schedules.map((schedule) => this.track(this.wake(schedule))));
  }

  private track(wakeUp: Promise<void>): Promise<void> {
    this.wakeUps.add(wakeUp);
    return wakeUp.finally(() => this.wakeUps.delete(wakeUp));
  }

  private async wake(schedule: RegisteredSchedule): Promise<void> {
    if (!this.running) return;
    const now = new Date(this.clock.now());
    const booting = this.bootSince.has(schedule.name);
    const after = booting ? this.bootSince.get(schedule.name)! : (this.handledUpTo.get(schedule.name) ?? now);
    const { catchUp, maxCatchUp } = schedule;
    // 'latest' and 'none' only ever start the newest due tick: no need to list the older ones.
    const due = schedule.cron.ticksBetween(after, now, catchUp === 'all' ? maxCatchUp + 1 : 1);
    const beyondBound = due.length > maxCatchUp ? due.shift() : undefined;
    const toStart = booting && catchUp === 'none' ? [] : due;
    let retryMs: number | undefined;
    try {
      for (const tick of toStart) {
        if (!this.running) return;
        await this.store.startTick(schedule, tick);
        if (!booting) this.handledUpTo.set(schedule.name, tick);
      }
      if (due.length > toStart.length) await this.store.skipTicksThrough(schedule.name, due[due.length - 1]);
      this.handledUpTo.set(schedule.name, now);
      this.bootSince.delete(schedule.name);
      if ((booting && due.length) || beyondBound) this.reportCatchUp(schedule, due, toStart.length, beyondBound);
      if (this.failing.delete(schedule.name)) this.logger.log(`Schedule "${schedule.name}" ticks again`);
    } catch (error) {
      if (!this.failing.has(schedule.name)) {
        this.logger.warn(`Schedule "${schedule.name}" could not start its tick (${describeError(error).message}); trying again`);
      }
      this.failing.add(schedule.name);
      // A boot wake-up is tried again as one (the ticks it started are not started twice); a
      // running one from the last tick it started.
      retryMs = RETRY_AFTER_FAILURE_MS;
    }
    // From the wake-up's own time: a tick that fell due while this one was writing (a slow commit) is next, at once.
    this.arm(schedule, now, retryMs);
  }

  private reportCatchUp(schedule: RegisteredSchedule, due: Date[], started: number, beyondBound: Date | undefined): void {
    const newest = due[due.length - 1].toISOString();
    if (beyondBound) {
      this.logger.warn(
        `Schedule "${schedule.name}" missed more than maxCatchUp (${schedule.maxCatchUp}) ticks: ` +
          `started the newest ${started}, up to ${newest}; skipped the older ones, up to ${beyondBound.toISOString()}`,
      );
    } else {
      this.logger.log(
        `Schedule "${schedule.name}" missed tick(s) up to ${newest} while no node ran it: started ${started} (catchUp '${schedule.catchUp}')`,
      );
    }
  }

  private arm(schedule: RegisteredSchedule, after: Date, retryMs?: number): void {
    if (!this.running) return;
    const next = schedule.cron.nextAfter(after);
    if (!next && retryMs === undefined) return;
    const untilNext = next ? Math.max(0, next.getTime() - this.clock.now()) : MAX_TIMER_MS;
    const delay = Math.min(untilNext, retryMs ?? MAX_TIMER_MS, MAX_TIMER_MS);
    this.timers.set(
      schedule.name,
      setTimeout(() => {
        this.timers.delete(schedule.name);
        void this.track(this.wake(schedule));
      }, delay),
    );
  }
}
