import { BeforeApplicationShutdown, Inject, Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { WorkerLoop } from '../background/worker-loop';
import { RESOLVED_DURAFLOW_OPTIONS } from '../duraflow.constants';
import { ResolvedDuraflowOptions } from '../duraflow.options';
import { FlowLimitStats } from '../interfaces/flow-control';
import { WorkerStats } from '../interfaces/worker-stats';

export type { BackpressureStats, WorkerState, WorkerStats } from '../interfaces/worker-stats';

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
  start(): Promise<void> {
    return this.loop.start();
  }

  /** Stops claiming, waits for running tasks up to `shutdownTimeoutMs`, hands back the rest. */
  stop(): Promise<void> {
    return this.loop.stop();
  }

  stats(): WorkerStats {
    return this.loop.stats();
  }

  /** What waits on the flow limits of this process's workflows, read from the database now (`stats().limits` holds the last reading). */
  readLimits(): Promise<FlowLimitStats[]> {
    return this.loop.readLimits();
  }
}
