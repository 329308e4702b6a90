import { Inject, Injectable } from '@nestjs/common';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { RESOLVED_DURAFLOW_OPTIONS, UUID_PATTERN } from '../domain/duraflow.constants';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { AgentTask } from '../domain/entities/agent-task.entity';
import { DeadLetter } from '../domain/entities/dead-letter.entity';
import {
  CompensationNotRegisteredError,
  DeadLetterBusyError,
  DeadLetterNotFoundError,
  DeadLetterOrphanedError,
  DeadLetterTaskActiveError,
  InvalidListOptionsError,
} from '../domain/errors';
import { isChildStep, UndoResult, undoStep } from '../execution/undo-step';
import { deadLetterError } from '../persistence/dead-letter-error';
import { decodeCursor, keysetPage, listLimit } from '../persistence/cursor';
import { DeadLetterClaim } from '../persistence/dead-letter-claim';
import { DeadLetterStore } from '../persistence/dead-letter.store';
import { DuraflowDatabase } from '../persistence/duraflow-database';
import { DeadLetterForRetry } from '../persistence/sql/read-dead-letter-for-retry';
import { TaskStore } from '../persistence/task.store';
import { RunObserver } from '../observability/run-observer';
import { TaskTransitions } from '../persistence/lifecycle/task-transitions';

export interface ListDeadLettersOptions {
  /** Only this task's dead letters. */
  taskId?: string;
  /** 1..1000, default 50. */
  limit?: number;
  /** `nextCursor` of the previous page. */
  cursor?: string;
}

export interface DeadLetterPage {
  items: DeadLetter[];
  /** Pass to `listDeadLetters` for the next (older) page; null on the last page. */
  nextCursor: string | null;
}

export interface DeadLetterRetryResult {
  /** `compensated`: the compensation succeeded, the entry is gone. `failed`: it failed again, the entry stays. */
  outcome: 'compensated' | 'failed';
  /** The task after the retry (`rolled_back` once its last dead letter is resolved). */
  task: AgentTask | null;
  /** The entry as it is now (retry_count and error updated), or null when it was resolved. */
  deadLetter: DeadLetter | null;
}

/**
 * The dead-letter queue of compensations that failed for good (the rollback itself runs in
 * the worker): list the entries, retry one, or discard one
 * whose effect a person undid by hand.
 */
@Injectable()
export class SagaService {
  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly registry: WorkflowRegistry,
    private readonly db: DuraflowDatabase,
    private readonly deadLetters: DeadLetterStore,
    private readonly tasks: TaskStore,
    private readonly transitions: TaskTransitions,
    private readonly observer: RunObserver,
  ) {}

  /**
   * Dead letters, newest first, paged with a keyset cursor; a page holds at most `limit` entries
   * and `maxListPageBytes` (at least one entry).
   */
  async listDeadLetters(options: ListDeadLettersOptions = {}): Promise<DeadLetterPage> {
    const limit = listLimit(options.limit);
    if (options.taskId !== undefined && (typeof options.taskId !== 'string' || !UUID_PATTERN.test(options.taskId))) {
      throw new InvalidListOptionsError('taskId', `must be a task id (a UUID), got ${String(options.taskId)}.`);
    }
    const page = await this.deadLetters.listDeadLetters({
      taskId: options.taskId,
      limit,
      maxBytes: this.options.maxListPageBytes,
      after: options.cursor ? decodeCursor(options.cursor) : undefined,
    });
    return keysetPage(page, (row) => row.deadLetter);
  }

  /**
   * Runs the entry's compensation once more (one attempt, with its timeout) on the output saved
   * for its step. Success removes the entry, sets the step's `compensated_at`, and moves the task
   * from `partial_rollback` to `rolled_back` when no entry of it is left; failure counts one more
   * retry and keeps the entry with the new error. The entry is claimed meanwhile (an advisory lock
   * held by a connection of its own, outside the pool): the compensation runs with no transaction
   * open and no row locked, two retries of one entry never run it twice at once, and a process
   * that dies mid-retry leaves the entry to be retried.
   *
   * @throws DeadLetterNotFoundError, DeadLetterBusyError, CompensationNotRegisteredError, DeadLetterOrphanedError (nothing written)
   */
  async retryDeadLetter(id: string): Promise<DeadLetterRetryResult> {
    if (typeof id !== 'string' || !UUID_PATTERN.test(id)) throw new DeadLetterNotFoundError(String(id));
    const claim = await this.deadLetters.claimForRetry(id, this.options.worker.leaseConfirmAfterMs);
    if (!claim) throw new DeadLetterBusyError(id);
    let retried: Omit<DeadLetterRetryResult, 'task'> & { taskId: string };
    try {
      const entry = await this.deadLetters.findForRetry(claim.session, id);
      if (!entry) throw new DeadLetterNotFoundError(id);
      retried = { ...(await this.retryClaimed(claim, entry)), taskId: entry.deadLetter.taskId };
    } finally {
      await claim.release();
    }
    const { taskId, ...result } = retried;
    return { ...result, task: await this.tasks.findTask(taskId) };
  }

  /**
   * Removes an entry whose effect was undone by hand: the compensation is not run and the step
   * keeps `compensated_at` empty (the engine did not undo it); a `partial_rollback` task with
   * no entry left becomes `rolled_back`. Returns the task as it is now.
   *
   * @throws DeadLetterNotFoundError, DeadLetterBusyError, DeadLetterTaskActiveError (its task is still rolling back)
   */
  async discardDeadLetter(id: string): Promise<AgentTask | null> {
    if (typeof id !== 'string' || !UUID_PATTERN.test(id)) throw new DeadLetterNotFoundError(String(id));
    const taskId = await this.db.transaction(async (tx) => {
      if (!(await this.deadLetters.claimInTransaction(tx, id))) throw new DeadLetterBusyError(id);
      const entry = await this.deadLetters.findForRetry(tx, id);
      if (!entry) throw new DeadLetterNotFoundError(id);
      if (entry.taskStatus === 'pending' || entry.taskStatus === 'running') {
        throw new DeadLetterTaskActiveError(id, entry.deadLetter.taskId, entry.taskStatus);
      }
      await this.transitions.resolveDeadLetter(tx, entry.deadLetter, false);
      return entry.deadLetter.taskId;
    });
    return this.tasks.findTask(taskId);
  }

  /**
   * The compensation of a claimed entry run again through `undoStep` (one attempt, no transaction
   * open), and its outcome written on the claim's session: resolved, or one more retry counted.
   */
  private async retryClaimed(claim: DeadLetterClaim, entry: DeadLetterForRetry): Promise<Omit<DeadLetterRetryResult, 'task'>> {
    const { deadLetter, stepKey, compensationFn, workflowName } = entry;
    if (stepKey === null) throw new DeadLetterOrphanedError(deadLetter.id);
    const step = {
      taskId: deadLetter.taskId,
      workflowName: workflowName ?? '',
      stepKey,
      output: entry.output,
      outputUndefined: entry.outputUndefined,
      compensationFn: compensationFn ?? '',
    };
    // Only a compensation this deployment registers can be retried: nothing written otherwise.
    if (
      !isChildStep(compensationFn) &&
      !(compensationFn && workflowName && this.registry.resolveCompensation(workflowName, stepKey, compensationFn))
    ) {
      throw new CompensationNotRegisteredError(String(compensationFn), stepKey, workflowName ?? undefined);
    }
    const result = await undoStep(step, {
      by: claim,
      deadLetterId: deadLetter.id,
      child: () => this.childResolved(claim, step),
      registry: this.registry,
      observer: this.observer,
    });
    if (result?.ok) {
      await claim.transaction((tx) => this.transitions.resolveDeadLetter(tx, deadLetter, true));
      return { outcome: 'compensated', deadLetter: null };
    }
    const failure = result ?? { error: claim.signal.reason, attempts: 1 };
    const retry = (deadLetter.retryCount ?? 0) + 1;
    const error = deadLetterError(failure.error, { stepKey, compensationFn, attempt: failure.attempts, retry });
    return {
      outcome: 'failed',
      deadLetter: await this.deadLetters.recordRetryFailure(claim.session, deadLetter.id, JSON.stringify(error), deadLetter.taskId),
    };
  }

  /**
   * A parent's dead letter for a child's step (the child's rollback was partial): nothing runs
   * here; it resolves once the child has no dead letter left (retry or discard those first).
   */
  private async childResolved(claim: DeadLetterClaim, step: { taskId: string; stepKey: string }): Promise<UndoResult> {
    const child = await this.deadLetters.openDeadLettersOfChild(claim.session, step.taskId, step.stepKey);
    if (!child || child.open === 0) return { ok: true, attempts: 1 };
    const reason = `the child task ${child.childTaskId} still has ${child.open} dead letter(s): retry or discard them first, then retry this one`;
    return { ok: false, error: new Error(reason), attempts: 1 };
  }
}
