import { setTimeout as delay } from 'node:timers/promises';
import { Inject, Injectable } from '@nestjs/common';
import { ResolvedDuraflowOptions } from '../../config/resolved-options';
import { WorkflowRegistry } from '../../discovery/workflow.registry';
import { BulkCancelOptions, BulkOptions, BulkResult } from '../../domain/bulk-operations';
import { RESOLVED_DURAFLOW_OPTIONS } from '../../domain/duraflow.constants';
import { TaskStatus } from '../../domain/task-status';
import { BulkBatch, BulkCandidate } from '../../persistence/lifecycle/bulk-batches';
import { TaskTransitions } from '../../persistence/lifecycle/task-transitions';
import { checkBulkFilter, checkBulkOptions } from '../../validation/bulk-filter';
import { TaskControl } from './task-control';

/** Tasks a batch reads and locks at most: one short transaction each, never more than one batch locked. */
export const BULK_BATCH_SIZE = 500;
/** How many times the tasks a batch passed over (a worker held their row at that moment) are tried again. */
const REVISITS = 3;
const REVISIT_PAUSE_MS = 50;

/** One batch as a bulk move runs it: the tasks it read, and the ids it changed. */
type BatchRun = (batch: BulkBatch) => Promise<{ candidates: BulkCandidate[]; changed: string[] }>;

/**
 * WorkflowService's bulk actions: cancelMany, retryMany, resumeMany. Each walks the tasks its
 * filter selects in keyset batches (bulk-batches.ts), a short transaction per batch, changing
 * each task at most once. A task a worker held at the moment its batch came (its row locked for
 * a claim, a heartbeat or a checkpoint) is passed over, then tried again by id up to REVISITS
 * times after the walk; one still held then, or that another actor moved meanwhile (claimed,
 * finished), counts as matched, not changed.
 */
@Injectable()
export class BulkTaskControl {
  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly registry: WorkflowRegistry,
    private readonly transitions: TaskTransitions,
    private readonly control: TaskControl,
  ) {}

  async cancelMany(filter: unknown, options?: BulkCancelOptions): Promise<BulkResult> {
    const selection = checkBulkFilter(filter, [TaskStatus.PENDING, TaskStatus.RUNNING], 'cancelMany');
    const { limit, dryRun, compensate } = checkBulkOptions(options);
    if (dryRun) return { matched: await this.transitions.countBulk('cancel', selection, limit), changed: 0 };
    // The compensations run in this process: every workflow matched must be registered here
    // (UnknownWorkflowError, nothing written), as for cancel(id, { compensate: true }).
    if (compensate) for (const name of await this.transitions.bulkWorkflows('cancel', selection)) this.registry.get(name);
    return this.walk(limit, async (batch) => {
      const { candidates, moved } = await this.transitions.cancelBatch(selection, batch, compensate, this.options.workerId);
      if (!moved) return { candidates, changed: [] };
      for (const { task, claimToken } of moved.takenOver) await this.control.rollBackTakenOver(task, claimToken);
      const changed = [...moved.cancelled, ...moved.takenOver.map(({ task }) => task.id)];
      // Children belong to their parent, as for cancel(id): the unfinished ones below are cancelled (and undone) too.
      await this.transitions.cancelDescendants(changed, { includeRoots: false, compensate });
      return { candidates, changed };
    });
  }

  async retryMany(filter: unknown, options?: BulkOptions): Promise<BulkResult> {
    const selection = checkBulkFilter(filter, [TaskStatus.FAILED, TaskStatus.CANCELLED], 'retryMany');
    const { limit, dryRun } = checkBulkOptions(options);
    if (dryRun) return { matched: await this.transitions.countBulk('retry', selection, limit), changed: 0 };
    return this.walk(limit, async (batch) => {
      const { candidates, moved } = await this.transitions.retryBatch(selection, batch);
      return { candidates, changed: moved ?? [] };
    });
  }

  async resumeMany(filter: unknown, options?: BulkOptions): Promise<BulkResult> {
    const selection = checkBulkFilter(filter, [TaskStatus.PENDING], 'resumeMany');
    const { limit, dryRun } = checkBulkOptions(options);
    if (dryRun) return { matched: await this.transitions.countBulk('resume', selection, limit), changed: 0 };
    return this.walk(limit, async (batch) => {
      const { candidates, moved } = await this.transitions.resumeBatch(selection, batch);
      return { candidates, changed: moved ?? [] };
    });
  }

  /** The walk: keyset batches until the selection or `limit` is exhausted, then the tasks passed over, by id. */
  private async walk(limit: number, run: BatchRun): Promise<BulkResult> {
    let matched = 0;
    let changed = 0;
    let passedOver: string[] = [];
    let after: BulkCandidate | null = null;
    while (changed < limit) {
      const size = Math.min(BULK_BATCH_SIZE, limit - changed);
      const batch = await run({ after, size });
      matched += batch.candidates.length;
      changed += batch.changed.length;
      passedOver.push(...notLocked(batch.candidates));
      if (batch.candidates.length < size) break;
      after = batch.candidates[batch.candidates.length - 1];
    }
    for (let round = 1; round <= REVISITS && passedOver.length && changed < limit; round++) {
      await delay(REVISIT_PAUSE_MS * round);
      const again: string[] = [];
      let start = 0;
      while (start < passedOver.length && changed < limit) {
        const ids = passedOver.slice(start, start + Math.min(BULK_BATCH_SIZE, limit - changed));
        start += ids.length;
        const batch = await run({ ids });
        changed += batch.changed.length;
        again.push(...notLocked(batch.candidates));
      }
      passedOver = again;
    }
    return { matched, changed };
  }
}

function notLocked(candidates: BulkCandidate[]): string[] {
  return candidates.filter((candidate) => !candidate.locked).map((candidate) => candidate.id);
}
