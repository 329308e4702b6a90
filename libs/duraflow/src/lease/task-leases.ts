import { Inject, Injectable } from '@nestjs/common';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { TaskTransitions } from '../persistence/lifecycle/task-transitions';
import { LeaseFencing, TaskLease } from './task-lease';

/** Opens the leases of the claims this process makes (a worker's claims, cancel's take-overs). */
@Injectable()
export class TaskLeases {
  private readonly fencing: LeaseFencing;

  constructor(@Inject(RESOLVED_DURAFLOW_OPTIONS) options: ResolvedDuraflowOptions, transitions: TaskTransitions) {
    this.fencing = {
      // A statement may wait out an outage for as long as the reaper leaves the task with this claim.
      retryForMs: options.reaper.staleAfterMs,
      ownsTask: (taskId, claimToken) => transitions.ownsTask(taskId, claimToken),
      confirmAfterMs: options.worker.leaseConfirmAfterMs,
      confirm: async (taskId, claimToken) => (await transitions.renew([taskId], [claimToken])).has(claimToken),
    };
  }

  /** The lease of a claim just made (sent at `claimedAt`, `performance.now()`): `claimToken` fences every write of its run. */
  open(taskId: string, claimToken: string, claimedAt?: number): TaskLease {
    return new TaskLease(taskId, claimToken, this.fencing, claimedAt);
  }
}
