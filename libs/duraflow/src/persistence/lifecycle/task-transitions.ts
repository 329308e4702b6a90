import { Injectable, Optional } from '@nestjs/common';
import { PayloadCoder } from '../../codec/payload-coder';
import { TaskCoding } from './task-coding';
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
import { ClaimedTask, claimTasks, claimTasksProbing } from './claim-tasks';
import { CreatedTask, createTask, createTasks, createTasksTogether, NewTask, NewTasks } from './create-tasks';
import { deleteExpiredTasks, ExpiryRule } from './delete-expired-tasks';
import { ForkOutcome, forkTask, NewFork } from './fork-task';
import { beginRollback, completeTasks, failTask, finishRollback } from './finish-tasks';
import { holdTask, resumeHeldTask, resumeHeldTasks } from './hold-task';
import type { LeaderFence } from './leader-fence';
import { ReapedTask, reapStaleTasks } from './reap-stale-tasks';
import { recoverNodeTasks } from './recover-node-tasks';
import { recoverCrashedClaim } from './recover-crashed-claim';
import { releaseClaims, renewClaims, ownsTask } from './renew-claims';
import { ResolvedDeadLetter, resolveDeadLetter } from './resolve-dead-letter';
import { retryTasks } from './retry-tasks';
import { SentSignal, sendSignal } from './send-signal';
import { CallbackCompletion, completeCallback } from './complete-callback';
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
  /** Payloads in and out of the moves: encoded on the way in, decoded when read (codec/payload-coder.ts). */
  private readonly coding: TaskCoding;

  constructor(
    private readonly db: DuraflowDatabase,
    @Optional() coder?: PayloadCoder,
  ) {
    this.coding = new TaskCoding(coder);
  }

  /** create: on `executor` (a caller's transaction, a tick's) or the pool; finds the task holding the idempotency key. */
  async create(task: NewTask, executor: SqlExecutor = this.db): Promise<CreatedTask> {
    const created = await createTask(executor, this.coding.newTask(task));
    return this.coding.created(created, task.inputJson, executor);
  }

  /**
   * create, for the tasks of concurrent callers on the pool, in one statement (one commit, one
   * NOTIFY per workflow); a task whose idempotency key is held goes through `create` (finds the holder).
   */
  async createTogether(tasks: NewTask[]): Promise<CreatedTask[]> {
    if (tasks.length === 1) return [await this.create(tasks[0])];
    const encoded = tasks.map((task) => this.coding.newTask(task));
    // A statement that fails fails for every task in it: each is then created alone, so each caller gets its own outcome.
    const created = await createTasksTogether(this.db, encoded).catch(() => encoded.map(() => null));
    return Promise.all(
      created.map(async (result, index) =>
        this.coding.created(result ?? (await createTask(this.db, encoded[index])), tasks[index].inputJson, this.db),
      ),
    );
  }

  /** create, for many tasks of one workflow in one statement. */
  async createMany(batch: NewTasks, executor: SqlExecutor = this.db): Promise<AgentTask[]> {
    return this.coding.tasks(await createTasks(executor, this.coding.newTasks(batch)));
  }

  /** create, for a fork: the task and the copy of the original's steps before its `fromStep`, in one transaction. */
  async fork(fork: NewFork): Promise<ForkOutcome> {
    const outcome = await forkTask(this.db, this.coding.newTask(fork), this.coding.forkRecoder(fork.forkedFrom.taskId));
    if ('task' in outcome) this.coding.task(outcome.task);
    return outcome;
  }

  /** retry: the failed (or cancelled, not compensated) tasks among `ids` back to pending, in one statement; the ids it changed. */
  retry(ids: string[], executor: SqlExecutor = this.db): Promise<string[]> {
    return retryTasks(executor, ids);
  }

  /** claim: the plain claim (the limited one: FlowLimitsStore). */
  async claim(workerId: string, workflows: ClaimableWorkflows, limit: number): Promise<ClaimedTask[]> {
    return this.coding.claimed(await claimTasks(this.db, workerId, workflows, limit));
  }

  /** claim, the plain one, with a probe of limited workflows in its round trip: the names of those with a runnable task. */
  async claimProbing(
    workerId: string,
    workflows: ClaimableWorkflows,
    limit: number,
    probed: ReadonlyArray<{ name: string; versions: readonly number[] }>,
  ): Promise<{ claimed: ClaimedTask[]; runnable: string[] }> {
    const { claimed, runnable } = await claimTasksProbing(this.db, workerId, workflows, limit, probed);
    return { claimed: this.coding.claimed(claimed), runnable };
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
    return completeTasks(this.db, ids, claimTokens, this.coding.outputs(ids, outputs));
  }

  fail(id: string, claimToken: string, errorJson: string): Promise<boolean> {
    return failTask(this.db, id, claimToken, this.coding.error(id, errorJson));
  }

  beginRollback(id: string, claimToken: string, reason: RollbackReason, errorJson: string | null): Promise<boolean> {
    return beginRollback(this.db, id, claimToken, reason, this.coding.error(id, errorJson));
  }

  /** end rollback: the status it ended in. */
  finishRollback(id: string, claimToken: string, reason: RollbackReason, hadStepsToUndo: boolean): Promise<TaskStatus | null> {
    return finishRollback(this.db, id, claimToken, reason, hadStepsToUndo);
  }

  /** suspend (or go on): a wait settled under the run's claim. */
  async settleWait(wait: WaitToSettle): Promise<WaitSettlement> {
    return this.coding.settlement(wait, await settleWait(this.db, wait));
  }

  /** A due sleep's row completed: its place in the completion order, or null. */
  completeDueSleep(taskId: string, claimToken: string, stepKey: string, runSeq: number): Promise<number | null> {
    return completeDueSleep(this.db, taskId, claimToken, stepKey, runSeq);
  }

  /** create a child (and, for runChild, suspend its parent), in a transaction of its own. */
  startChild(start: ChildToStart): Promise<{ childTaskId: string } | null> {
    return this.db.transaction((tx) => startChild(tx, { ...start, child: this.coding.newTask(start.child) }));
  }

  /** wake: a signal kept (at most `maxKept` untaken per task), and a task waiting for it woken (or its wait delivered at once). */
  sendSignal(taskId: string, name: string, payloadJson: string | null, maxKept: number): Promise<SentSignal> {
    return sendSignal(this.db, taskId, name, this.coding.signal(taskId, payloadJson), maxKept);
  }

  /** wake, for a callback: its row completed (the first completion wins) and its signal sent to its task, in one transaction. */
  completeCallback(callbackId: string, taskId: string, payloadJson: string | null): Promise<CallbackCompletion> {
    const callbackPayloadJson = this.coding.coder.encodeJson(taskId, 'callback', payloadJson);
    const signalPayloadJson = this.coding.signal(taskId, payloadJson);
    return this.db.transaction((tx) => completeCallback(tx, { callbackId, taskId, callbackPayloadJson, signalPayloadJson }));
  }

  hold(id: string, claimToken: string, errorJson: string): Promise<boolean> {
    return holdTask(this.db, id, claimToken, this.coding.error(id, errorJson));
  }

  /** resume: the task, or null when it is not held. */
  async resume(id: string): Promise<AgentTask | null> {
    return this.coding.task(await resumeHeldTask(this.db, id));
  }

  async cancel(id: string): Promise<CancelledTask> {
    const cancelled = await cancelTask(this.db, id);
    this.coding.task(cancelled.task);
    return cancelled;
  }

  async takeOverForCancelRollback(id: string, workerId: string): Promise<CancelRollbackTakeOver> {
    const takenOver = await takeOverForCancelRollback(this.db, id, workerId);
    this.coding.task(takenOver.task);
    return takenOver;
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
    return moveBulkBatch<CancelledBatch>(this.db, 'cancel', selection, batch, async (tx, ids) => {
      const cancelled = await cancelLockedTasks(tx, ids, compensate, workerId);
      for (const { task } of cancelled.takenOver) this.coding.task(task);
      return cancelled;
    });
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
  /** The testing kit's recovery of one run it crashed: that claim reaped as a stale one is, at once. */
  recoverCrashedClaim(taskId: string, claimToken: string): Promise<ReapedTask | undefined> {
    return recoverCrashedClaim(this.db, taskId, claimToken);
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
