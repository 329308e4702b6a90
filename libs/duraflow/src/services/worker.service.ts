import { BeforeApplicationShutdown, Inject, Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { WorkerLoop } from '../background/worker-loop';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { isReplayBoot } from '../replay/replay-boot';
import { FlowLimitStats } from '../domain/flow-control';
import { WorkerStats } from '../domain/worker-stats';
import { ScheduleTicker } from '../schedules/schedule-ticker';

export type { BackpressureStats, WorkerState, WorkerStats } from '../domain/worker-stats';

/**
 * This process's worker: claims tasks of the workflows it registers and runs up to
 * `concurrency` at once (background/worker-loop.ts). Woken by NOTIFY on submit, with a poll as
 * the fallback; heartbeats its running tasks in one statement per tick. On shutdown it stops
 * claiming, lets running tasks finish for `shutdownTimeoutMs`, then hands the rest back to
 * `pending`.
 */
@Injectable()
export class WorkerService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly loop: WorkerLoop,
    private readonly schedules: ScheduleTicker,
  ) {}

  /** This process's worker id: written to `agent_tasks.worker_id` on every claim. */
  get workerId(): string {
    return this.options.workerId;
  }

  onApplicationBootstrap(): Promise<void> | void {
    // The replay check boots the host's module to read its workflows: it must never claim or reap.
    if (this.options.worker.enabled && !isReplayBoot()) return this.start();
  }

  beforeApplicationShutdown(): Promise<void> {
    return this.stop();
  }

  /** Starts claiming and ticking the schedules (called on bootstrap unless `worker.enabled` is false). */
  async start(): Promise<void> {
    await this.loop.start();
    await this.schedules.start();
  }

  /** Stops the schedules and claiming, waits for running tasks up to `shutdownTimeoutMs`, hands back the rest. */
  async stop(): Promise<void> {
    await this.schedules.stop();
    await this.loop.stop();
  }

  stats(): WorkerStats {
    return this.loop.stats();
  }

  /** What waits on the flow limits of this process's workflows, read from the database now (`stats().limits` holds the last reading). */
  readLimits(): Promise<FlowLimitStats[]> {
    return this.loop.readLimits();
  }
}
