import { Injectable } from '@nestjs/common';
import { BulkSelection } from '../../domain/bulk-operations';
import { AgentTask, RollbackReason } from '../../domain/entities/agent-task.entity';
import { TaskStatus } from '../../domain/task-status';
import { DuraflowDatabase, SqlExecutor } from '../duraflow-database';
import { BulkBatch, BulkCandidate, BulkMoveKind, bulkSelectionWorkflows, countBulkSelection, moveBulkBatch } from './bulk-batches';
import {
  CancelledBatch,
  CancelledTask,
  CancelRollbackTakeOver,
  cancelDescendants,
  cancelLockedTasks,
  cancelTask,
  takeOverForCancelRollback,
} from './cancel-tasks';
import { ClaimedTask, claimTasks } from './claim-tasks';
import { CreatedTask, createTask, createTasks, NewTask, NewTasks } from './create-tasks';
import { deleteExpiredTasks, ExpiryRule } from './delete-expired-tasks';
import { ForkOutcome, forkTask, NewFork } from './fork-task';
import { beginRollback, completeTasks, failTask, finishRollback } from './finish-tasks';
import { holdTask, resumeHeldTask, resumeHeldTasks } from './hold-task';
import type { LeaderFence } from './leader-fence';
import { ReapedTask, reapStaleTasks } from './reap-stale-tasks';
import { recoverNodeTasks } from './recover-node-tasks';
import { releaseClaims, renewClaims, ownsTask } from './renew-claims';
import { ResolvedDeadLetter, resolveDeadLetter } from './resolve-dead-letter';
import { retryTasks } from './retry-tasks';
import { SentSignal, sendSignal } from './send-signal';
import { completeDueSleep, settleWait, WaitSettlement, WaitToSettle } from './settle-wait';
import { ChildToStart, startChild } from './start-child';
import { ClaimableWorkflows } from './task-lifecycle';

/**
 * The moves of the task lifecycle (task-lifecycle.ts), by name: what the worker, the run, the
 * reaper and the services ask for. Each is one statement or one transaction of this folder; none
 * is written anywhere else. Fenced moves (those of a run) resolve false or null when the claim
 * no longer owns the task.
 */
@Injectable()
export class TaskTransitions {
  constructor(private readonly db: DuraflowDatabase) {}

  /** create: on `executor` (a caller's transaction, a tick's) or the pool; finds the task holding the idempotency key. */
  create(task: NewTask, executor: SqlExecutor = this.db): Promise<CreatedTask> {
    return createTask(executor, task);
  }

  /** create, for many tasks of one workflow in one statement. */
  createMany(batch: NewTasks, executor: SqlExecutor = this.db): Promise<AgentTask[]> {
    return createTasks(executor, batch);
  }

  /** create, for a fork: the task and the copy of the original's steps before its `fromStep`, in one transaction. */
  fork(fork: NewFork): Promise<ForkOutcome> {
    return forkTask(this.db, fork);
  }

  /** retry: the failed (or cancelled, not compensated) tasks among `ids` back to pending, in one statement; the ids it changed. */
  retry(ids: string[], executor: SqlExecutor = this.db): Promise<string[]> {
    return retryTasks(executor, ids);
  }

  /** claim: the plain claim (the limited one: FlowLimitsStore). */
  claim(workerId: string, workflows: ClaimableWorkflows, limit: number): Promise<ClaimedTask[]> {
    return claimTasks(this.db, workerId, workflows, limit);
  }

  /** renew: the claim tokens that still own their task. */
  renew(ids: string[], claimTokens: string[]): Promise<Set<string>> {
    return renewClaims(this.db, ids, claimTokens);
  }

  ownsTask(id: string, claimToken: string): Promise<boolean> {
    return ownsTask(this.db, id, claimToken);
  }

  /** release: the ids handed back to pending. */
  release(ids: string[], claimTokens: string[]): Promise<string[]> {
    return releaseClaims(this.db, ids, claimTokens);
  }

  /** complete, for many runs (each fenced on its own claim): the ids that completed. */
  complete(ids: string[], claimTokens: string[], outputs: Array<string | null>): Promise<Set<string>> {
    return completeTasks(this.db, ids, claimTokens, outputs);
  }

  fail(id: string, claimToken: string, errorJson: string): Promise<boolean> {
    return failTask(this.db, id, claimToken, errorJson);
  }

  beginRollback(id: string, claimToken: string, reason: RollbackReason, errorJson: string | null): Promise<boolean> {
    return beginRollback(this.db, id, claimToken, reason, errorJson);
  }

  /** end rollback: the status it ended in. */
  finishRollback(id: string, claimToken: string, reason: RollbackReason, hadStepsToUndo: boolean): Promise<TaskStatus | null> {
    return finishRollback(this.db, id, claimToken, reason, hadStepsToUndo);
  }

  /** suspend (or go on): a wait settled under the run's claim. */
  settleWait(wait: WaitToSettle): Promise<WaitSettlement> {
    return settleWait(this.db, wait);
  }

  /** A due sleep's row completed: its place in the completion order, or null. */
  completeDueSleep(taskId: string, claimToken: string, stepKey: string, runSeq: number): Promise<number | null> {
    return completeDueSleep(this.db, taskId, claimToken, stepKey, runSeq);
  }

  /** create a child (and, for runChild, suspend its parent), in a transaction of its own. */
  startChild(start: ChildToStart): Promise<{ childTaskId: string } | null> {
    return this.db.transaction((tx) => startChild(tx, start));
  }

  /** wake: a signal kept (at most `maxKept` untaken per task), and a task waiting for it woken (or its wait delivered at once). */
  sendSignal(taskId: string, name: string, payloadJson: string | null, maxKept: number): Promise<SentSignal> {
    return sendSignal(this.db, taskId, name, payloadJson, maxKept);
  }

  hold(id: string, claimToken: string, errorJson: string): Promise<boolean> {
    return holdTask(this.db, id, claimToken, errorJson);
  }

  /** resume: the task, or null when it is not held. */
  resume(id: string): Promise<AgentTask | null> {
    return resumeHeldTask(this.db, id);
  }

  cancel(id: string): Promise<CancelledTask> {
    return cancelTask(this.db, id);
  }

  takeOverForCancelRollback(id: string, workerId: string): Promise<CancelRollbackTakeOver> {
    return takeOverForCancelRollback(this.db, id, workerId);
  }

  /** cancel or hand over the unfinished tasks of a tree: the ids it moved. */
  cancelDescendants(rootIds: string[], options: { includeRoots: boolean; compensate: boolean }): Promise<string[]> {
    return cancelDescendants(this.db, rootIds, options);
  }

  /**
   * cancelMany's batch, in one short transaction: its rows no one else holds locked (SKIP LOCKED)
   * and each cancelled, or with `compensate` and steps to undo, taken over under a claim of `workerId`.
   */
  cancelBatch(selection: BulkSelection, batch: BulkBatch, compensate: boolean, workerId: string) {
    return moveBulkBatch<CancelledBatch>(this.db, 'cancel', selection, batch, (tx, ids) =>
      cancelLockedTasks(tx, ids, compensate, workerId),
    );
  }

  /** resumeMany's batch, in one short transaction: its held rows no one else holds locked (SKIP LOCKED) and resumed. */
  resumeBatch(selection: BulkSelection, batch: BulkBatch): Promise<{ candidates: BulkCandidate[]; moved: string[] | null }> {
    return moveBulkBatch(this.db, 'resume', selection, batch, resumeHeldTasks);
  }

  /** retryMany's batch, in one short transaction: its retryable rows no one else holds locked (SKIP LOCKED) and retried. */
  retryBatch(selection: BulkSelection, batch: BulkBatch): Promise<{ candidates: BulkCandidate[]; moved: string[] | null }> {
    return moveBulkBatch(this.db, 'retry', selection, batch, retryTasks);
  }

  /** How many tasks a bulk move's selection matches now, at most `limit` (a dry run). */
  countBulk(kind: BulkMoveKind, selection: BulkSelection, limit: number): Promise<number> {
    return countBulkSelection(this.db, kind, selection, limit);
  }

  /** The workflow names of the tasks a bulk move's selection matches now. */
  bulkWorkflows(kind: BulkMoveKind, selection: BulkSelection): Promise<string[]> {
    return bulkSelectionWorkflows(this.db, kind, selection);
  }

  /** reap: one pass over the stale tasks, fenced on the reaper's leadership when given one. */
  reap(staleAfterMs: number, fence?: LeaderFence): Promise<ReapedTask[]> {
    return reapStaleTasks(this.db, staleAfterMs, fence);
  }

  /** recover: the running tasks of the earlier processes of node `nodeId`, moved as the reaper would; on `lockSession`, the node lock's own. */
  recoverNodeTasks(lockSession: SqlExecutor, nodeId: string, workerId: string): Promise<ReapedTask[]> {
    return recoverNodeTasks(lockSession, nodeId, workerId);
  }

  /** resolve: a dead letter resolved inside the caller's transaction; the task's status then. */
  resolveDeadLetter(tx: SqlExecutor, entry: ResolvedDeadLetter, compensated: boolean): Promise<string | null> {
    return resolveDeadLetter(tx, entry, compensated);
  }

  /** delete: finished tasks past their retention, per status. */
  deleteExpired(rules: ExpiryRule[], batchSize: number): Promise<Map<TaskStatus, number>> {
    return deleteExpiredTasks(this.db, rules, batchSize);
  }
}
