import { BeforeApplicationShutdown, Inject, Injectable, OnApplicationBootstrap, OnModuleInit } from '@nestjs/common';
import { NodeIdentity } from '../background/node-identity';
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
 * `pending`. With `worker.nodeId`, it runs as that node: NodeIdentity (background/node-identity.ts).
 */
@Injectable()
export class WorkerService implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown {
  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly loop: WorkerLoop,
    private readonly schedules: ScheduleTicker,
    private readonly identity: NodeIdentity,
  ) {
    // Another process of this node holds its lock now: it took this one's tasks back.
    identity.onTaken(() => void this.stop());
  }

  /** This process's worker id: written to `agent_tasks.worker_id` on every claim. */
  get workerId(): string {
    return this.options.workerId;
  }

  /**
   * With `worker.nodeId`: takes the node's lock and its earlier process's tasks back before the
   * worker, the reaper or the schedules start (they start at bootstrap), so a second live process
   * of the node refuses to boot (NodeIdInUseError) having started nothing.
   */
  async onModuleInit(): Promise<void> {
    if (this.options.worker.enabled && !isReplayBoot()) await this.identity.acquire();
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
    await this.identity.acquire();
    await this.loop.start();
    await this.schedules.start();
  }

  /** Stops the schedules and claiming, waits for running tasks up to `shutdownTimeoutMs`, hands back the rest. */
  async stop(): Promise<void> {
    await this.schedules.stop();
    await this.loop.stop();
    await this.identity.release();
  }

  stats(): WorkerStats {
    return this.loop.stats();
  }

  /** What waits on the flow limits of this process's workflows, read from the database now (`stats().limits` holds the last reading). */
  readLimits(): Promise<FlowLimitStats[]> {
    return this.loop.readLimits();
  }
}
