import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { REAPER_INTERVAL_NAME, RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { ReapResult } from '../domain/reap-result';
import { TaskStatus } from '../domain/task-status';
import { createLeaderElection, LeaderElection, LeaderFence, reaperLeaderApplicationName } from '../leader';
import { TaskNotifications } from '../notifications/task-notifications';
import { DuraflowDatabase } from '../persistence/duraflow-database';
import { TaskTransitions } from '../persistence/lifecycle/task-transitions';
import { DuraflowMetrics } from '../observability/metrics';
import { DuraflowLogger } from '../observability/duraflow-logger';
import type { ReapedTask } from '../persistence/lifecycle/reap-stale-tasks';
import { describeError } from '../util/describe-error';
import { RetentionSweeper } from './retention-sweeper';
import { TaskStatsRollup } from './task-stats-rollup';

/**
 * The reaper's loop: recovers the tasks of dead workers (running tasks whose heartbeat went
 * stale). On every tick each node tries to become or stay leader (Redis key with a ttl, or a
 * lease row in PostgreSQL without Redis), ticking often enough to renew within the ttl; only
 * the leader reaps, every `reaper.intervalMs`, and its reap statement carries the election's
 * fence (LeaderFence), so a pass by a leader that lost its leadership meanwhile (a frozen
 * process that wakes) changes nothing. The interval is registered in @nestjs/schedule's
 * SchedulerRegistry when the host imported `ScheduleModule.forRoot()`. While the database is
 * quiet (the last pass found nothing, and LISTEN, up all along, heard no task submitted or
 * finished since) the leader reaps every `staleAfterMs` instead: no task can have gone stale
 * faster than that, and an idle cluster then costs a pass per `staleAfterMs`, not per interval.
 */
@Injectable()
export class ReaperLoop {
  private readonly logger = new Logger('Duraflow');
  private readonly taskLogger = new DuraflowLogger();
  private election: LeaderElection | undefined;
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  /** Ticks since start; the leader reaps on every `reapEvery`-th one. */
  private ticks = 0;
  private reapEvery = 1;
  /** Reaping passes skipped in a row while quiet, and how many may be (staleAfterMs / intervalMs - 1). */
  private quietSkips = 0;
  private maxQuietSkips = 0;
  private lastPass: { at: number; found: number } | undefined;
  private reapFailing = false;
  private sweepFailing = false;
  private schemaFailing = false;
  private stopped = false;

  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly transitions: TaskTransitions,
    private readonly db: DuraflowDatabase,
    private readonly metrics: DuraflowMetrics,
    private readonly notifications: TaskNotifications,
    private readonly retention: RetentionSweeper,
    private readonly statsRollup: TaskStatsRollup,
    @Optional() private readonly scheduler?: SchedulerRegistry,
  ) {}

  /** True while this node holds the reaper's leadership (judged locally, within the ttl). */
  isLeader(): boolean {
    return this.election?.isLeader() ?? false;
  }

  /** How leadership is decided here: `redis` with a `redis` option, `postgres` (a lease row) without. */
  get electionKind(): 'redis' | 'postgres' | undefined {
    return this.election?.kind;
  }

  start(): void {
    if (this.timer) return;
    this.stopped = false;
    const { intervalMs, leaderTtlMs, leaderKey } = this.options.reaper;
    this.election = createLeaderElection({
      redis: this.options.redis,
      // Named after this worker, so pg_stat_activity tells which node's connection it is.
      createClient: () => this.db.createDedicatedClient(reaperLeaderApplicationName(this.options.workerId)),
      key: leaderKey,
      workerId: this.options.workerId,
      ttlMs: leaderTtlMs,
      logger: this.logger,
    });
    // The leader renews well before its key expires, however long the reaping interval is.
    const period = Math.max(1, Math.min(intervalMs, Math.floor(leaderTtlMs / 3)));
    this.reapEvery = Math.max(1, Math.round(intervalMs / period));
    this.maxQuietSkips = Math.max(0, Math.ceil(this.options.reaper.staleAfterMs / intervalMs) - 1);
    this.quietSkips = 0;
    this.lastPass = undefined;
    this.ticks = 0;
    this.timer = setInterval(() => this.tick(), period);
    if (this.scheduler) {
      this.scheduler.addInterval(REAPER_INTERVAL_NAME, this.timer);
    } else {
      this.logger.warn(
        'ScheduleModule.forRoot() is not imported: the reaper runs on a timer of its own. Import it once in your root module.',
      );
    }
    this.tick();
  }

  /** Stops ticking and gives leadership up (compare-and-delete in Redis, the lease row expired in PostgreSQL). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) {
      clearInterval(this.timer);
      if (this.scheduler?.doesExist('interval', REAPER_INTERVAL_NAME)) this.scheduler.deleteInterval(REAPER_INTERVAL_NAME);
      this.timer = undefined;
    }
    // Taken first: a start() during the awaits below makes an election of its own.
    const election = this.election;
    this.election = undefined;
    await this.ticking;
    await election?.close();
  }

  /** One reaping pass over tasks stale for longer than `reaper.staleAfterMs`, on any node (leader or not). */
  reapOnce(): Promise<ReapResult> {
    return this.reap();
  }

  /** A reaping pass; with a fence, it changes nothing unless the fence still holds when the statement runs. */
  async reap(fence?: LeaderFence): Promise<ReapResult> {
    const reaped = await this.transitions.reap(this.options.reaper.staleAfterMs, fence);
    const result: ReapResult = {
      requeued: reaped.filter((task) => task.action === 'requeue').map((task) => task.id),
      rollingBack: reaped.filter((task) => task.action === 'rollback').map((task) => task.id),
      failed: reaped.filter((task) => task.status === TaskStatus.FAILED).map((task) => task.id),
      ended: reaped.filter((task) => task.action === 'end' || task.action === 'abandon').map(({ id, status }) => ({ id, status })),
    };
    this.countReaped(reaped, result);
    for (const task of reaped) {
      if ((task.action === 'end' || task.action === 'abandon') && task.status !== TaskStatus.CANCELLED) {
        this.taskLogger.warn(`Task ${task.id} (${task.workflowName}) ended ${task.status}: ${task.errorCode ?? 'UNKNOWN'}`, {
          taskId: task.id,
          workflow: task.workflowName,
          code: task.errorCode ?? 'UNKNOWN',
        });
      }
    }
    if (reaped.length) {
      this.logger.log(
        `Reaped ${reaped.length} stale task(s): ${result.requeued.length} re-queued, ` +
          `${result.rollingBack.length} sent to rollback, ${result.ended.length} ended`,
      );
    }
    return result;
  }

  private countReaped(reaped: ReapedTask[], result: ReapResult): void {
    this.metrics.reaped('requeued', result.requeued.length);
    this.metrics.reaped('rolling_back', result.rollingBack.length);
    this.metrics.reaped('ended', result.ended.length);
    for (const task of reaped)
      if (task.action === 'end' || task.action === 'abandon') this.metrics.taskFinished(task.workflowName, task.status);
  }

  /** Retention runs on the leader only, after the election, whether or not this tick reaps. */
  private async sweepIfDue(): Promise<void> {
    if (!this.retention.due()) return;
    try {
      await this.retention.sweep();
      if (this.sweepFailing) this.logger.log('Retention works again');
      this.sweepFailing = false;
    } catch (error) {
      if (!this.sweepFailing) this.logger.warn(`Retention failed (${describeError(error).message}); retrying on the next tick`);
      this.sweepFailing = true;
    }
  }

  /**
   * A node with a worker checked the schema at boot (SchemaBootCheck); one without (the reaper
   * alone) does not stand for election until the migrations are there, checking on each tick.
   */
  private async schemaReady(): Promise<boolean> {
    try {
      await this.db.ensureSchemaReady();
      if (this.schemaFailing) this.logger.log("Duraflow's migrations are applied: the reaper starts");
      this.schemaFailing = false;
      return true;
    } catch (error) {
      if (!this.schemaFailing) this.logger.error(`The reaper waits for Duraflow's migrations: ${describeError(error).message}`);
      this.schemaFailing = true;
      return false;
    }
  }

  /** Nothing happened on the database since a pass that found nothing to reap. */
  private quiet(): boolean {
    return this.lastPass !== undefined && this.lastPass.found === 0 && this.notifications.quietSince(this.lastPass.at);
  }

  /** A tick never overlaps the previous one and never throws. */
  private tick(): void {
    if (this.ticking || this.stopped) return;
    this.ticks++;
    this.ticking = this.leadAndReap().finally(() => (this.ticking = undefined));
  }

  private async leadAndReap(): Promise<void> {
    const election = this.election;
    if (!election || !(await this.schemaReady())) return;
    // The election logs each change of leadership.
    const leader = await election.tick();
    if (!leader || this.stopped) return;
    await this.sweepIfDue();
    await this.statsRollup.rollUpIfDue();
    // Counted in ticks, not measured: a tick late by a round trip must not skip a whole interval.
    if ((this.ticks - 1) % this.reapEvery !== 0) return;
    if (this.quiet() && this.quietSkips < this.maxQuietSkips) {
      this.quietSkips++;
      return;
    }
    this.quietSkips = 0;
    try {
      const fence = await election.fence(this.db);
      if (!fence || this.stopped) return;
      const startedAt = Date.now();
      const result = await this.reap(fence);
      const found = result.requeued.length + result.rollingBack.length + result.ended.length;
      this.lastPass = { at: startedAt, found };
      if (this.reapFailing) this.logger.log('Reaping works again');
      this.reapFailing = false;
    } catch (error) {
      if (!this.reapFailing) this.logger.warn(`Reaping failed (${describeError(error).message}); retrying on the next tick`);
      this.reapFailing = true;
      this.lastPass = undefined;
    }
  }
}
