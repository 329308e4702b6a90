import { performance } from 'node:perf_hooks';
import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { TaskTransitions } from '../persistence/lifecycle/task-transitions';
import { describeError } from '../util/describe-error';
import { TaskLease } from '../lease/task-lease';
import { DuraflowMetrics } from '../observability/metrics';

/**
 * Keeps every task this process holds alive: one fenced statement per `heartbeatIntervalMs`
 * for all of them (worker runs and rollbacks started by cancel alike). A lease whose claim no
 * longer owns its task is stopped, so its run changes nothing more. No timer while idle.
 */
@Injectable()
export class LeaseHeartbeat implements OnApplicationShutdown {
  private readonly logger = new Logger('Duraflow');
  private readonly leases = new Set<TaskLease>();
  private timer: NodeJS.Timeout | undefined;
  private failing = false;
  private beating = false;
  private shutDown = false;

  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly transitions: TaskTransitions,
    private readonly metrics: DuraflowMetrics,
  ) {}

  hold(lease: TaskLease): void {
    this.leases.add(lease);
    if (!this.shutDown) this.timer ??= setInterval(() => void this.beat(), this.options.heartbeatIntervalMs);
  }

  release(lease: TaskLease): void {
    this.leases.delete(lease);
    if (!this.leases.size && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  onApplicationShutdown(): void {
    this.shutDown = true;
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One heartbeat for every held lease; never throws (an outage is logged once). */
  async beat(): Promise<void> {
    const leases = [...this.leases];
    // One beat at a time: during an outage a beat waits, and ticks must not pile up on the pool.
    if (!leases.length || this.beating) return;
    this.beating = true;
    const sentAt = performance.now();
    let owned: Set<string>;
    try {
      owned = await this.transitions.renew(
        leases.map((lease) => lease.taskId),
        leases.map((lease) => lease.claimToken),
      );
    } catch (error) {
      this.metrics.heartbeatFailed();
      if (!this.failing) this.logger.warn(`Heartbeat failed (${describeError(error).message}); retrying every tick`);
      this.failing = true;
      return;
    } finally {
      this.beating = false;
    }
    if (this.failing) this.logger.log('Heartbeat works again');
    this.failing = false;
    for (const lease of leases) {
      if (owned.has(lease.claimToken)) lease.confirmed(sentAt);
      else if (this.leases.has(lease)) lease.stop('lease-lost');
    }
  }
}
