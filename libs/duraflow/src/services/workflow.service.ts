import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { AgentTask } from '../domain/entities/agent-task.entity';
import { StepRun } from '../domain/entities/step-run.entity';
import { BulkCancelOptions, BulkOptions, BulkResult, BulkTaskFilter } from '../domain/bulk-operations';
import { ScheduleInfo } from '../domain/schedule-options';
import { StepSummary, StepSummaryOptions, TaskCountFilter, TaskCounts, TaskProgress } from '../domain/task-summaries';
import { TaskSignal } from '../persistence/signal.store';
import { ScheduleReader } from '../schedules/schedule-reader';
import { BulkTaskControl } from './workflows/bulk-control';
import { CancelOptions, SignalReceipt, TaskControl } from './workflows/task-control';
import { ForkOptions, ForkResult, TaskOperations } from './workflows/task-operations';
import { ListSignalsOptions, ListTasksOptions, SignalPage, TaskPage, TaskReader } from './workflows/task-reader';
import { SubmitOptions, SubmitResult, TaskSubmitter } from './workflows/task-submitter';
import { TaskWaiter, WaitForOptions } from './workflows/task-waiter';
import { GetLogsOptions, RunLogPage, RunLogReader } from './workflows/run-log-reader';
import { GetEventOptions, ReadStreamOptions, RunTalkReader, StreamChunk } from './workflows/run-talk-reader';
import { CallbackInfo, CallbackReceipt, TaskCallbacks } from './workflows/task-callbacks';
import { ScheduleControl } from '../schedules/schedule-control';
import { EventPublisher, PublishOptions } from '../events/event-publisher';
import { EventReader, ListEventsOptions } from '../events/event-reader';
import { OpenEventGroup, PublishedEventInfo, PublishResult } from '../domain/event-options';

export type { CancelOptions, SignalReceipt } from './workflows/task-control';
export type { ForkOptions, ForkResult } from './workflows/task-operations';
export type { ListSignalsOptions, ListTasksOptions, SignalPage, TaskPage } from './workflows/task-reader';
export type { SubmitOptions, SubmitResult } from './workflows/task-submitter';
export type { WaitForOptions } from './workflows/task-waiter';
export type { CallbackInfo, CallbackReceipt } from './workflows/task-callbacks';
export type { PublishOptions } from '../events/event-publisher';
export type { ListEventsOptions } from '../events/event-reader';

/**
 * Submit, inspect, list, cancel and await workflow runs: one injectable facade over the jobs in
 * workflows/ (submits, reads, actions on a task, waiting for one).
 */
@Injectable()
export class WorkflowService {
  constructor(
    private readonly submitter: TaskSubmitter,
    private readonly reader: TaskReader,
    private readonly control: TaskControl,
    private readonly waiter: TaskWaiter,
    private readonly schedules: ScheduleReader,
    private readonly bulk: BulkTaskControl,
    private readonly operations: TaskOperations,
    private readonly runLogs: RunLogReader,
    private readonly talk: RunTalkReader,
    private readonly callbacks: TaskCallbacks,
    private readonly scheduleControl: ScheduleControl,
    private readonly events: EventPublisher,
    private readonly eventReader: EventReader,
  ) {}

  /**
   * Records event `name` and starts one task per subscribing workflow, all in one transaction
   * (`options.manager`'s when given): docs/events.md. A payload a workflow's DTO refuses is
   * recorded in that delivery, never thrown. Same `idempotencyKey` again: the first event.
   */
  publish(name: string, payload?: unknown, options: PublishOptions = {}): Promise<PublishResult> {
    return this.events.publish(name, payload, options);
  }

  /** Recent published events, newest first, with the task each started per subscribing workflow. */
  listEvents(options: ListEventsOptions = {}): Promise<PublishedEventInfo[]> {
    return this.eventReader.listEvents(options);
  }

  /** The debounces and batches whose task has not started yet, soonest due first. */
  listEventGroups(): Promise<OpenEventGroup[]> {
    return this.eventReader.listOpenGroups();
  }

  /**
   * Creates a `pending` task of workflow `name`. Everything is checked before anything is
   * written: a bad name, an unknown workflow, input failing the workflow's DTO, input that
   * is not JSON or too large, or a bad option throws a typed error and writes nothing.
   * With an `idempotencyKey` already used: the first task when the input is the same,
   * IdempotencyKeyConflictError when it is not.
   */
  async submit<TInput = unknown>(name: string, input?: TInput, options: SubmitOptions = {}, manager?: EntityManager): Promise<AgentTask> {
    return (await this.submitter.submit(name, input, options, manager)).task;
  }

  /**
   * `submit`, telling a new task (`created: true`, e.g. HTTP 201) from the one an earlier submit
   * with the same idempotency key and input created (`created: false`, e.g. 200).
   */
  submitWithResult<TInput = unknown>(
    name: string,
    input?: TInput,
    options: SubmitOptions = {},
    manager?: EntityManager,
  ): Promise<SubmitResult> {
    return this.submitter.submit(name, input, options, manager);
  }

  /**
   * Creates many `pending` tasks of workflow `name` in one statement (one NOTIFY for all), in
   * input order. Every input is checked first, as `submit` checks it: one bad input throws its
   * typed error (naming its index) and writes nothing. Options apply to every task;
   * `idempotencyKey` is not accepted here (use `submit` per task for that). At most 10,000.
   */
  submitMany<TInput = unknown>(name: string, inputs: TInput[], options: Omit<SubmitOptions, 'idempotencyKey'> = {}): Promise<AgentTask[]> {
    return this.submitter.submitMany(name, inputs, options);
  }

  /** The task, or null when no task has this id. */
  get(id: string): Promise<AgentTask | null> {
    return this.reader.get(id);
  }

  /** The task's step checkpoints: completed ones in completion order, then the unfinished. */
  getSteps(id: string): Promise<StepRun[]> {
    return this.reader.getSteps(id);
  }

  /**
   * Newest first, optionally by status and workflow, paged with a keyset cursor. A page holds at
   * most `limit` tasks and at most `maxListPageBytes` of them (always at least one): follow
   * `nextCursor`, not the count of items, to know whether more are left.
   */
  list(options: ListTasksOptions = {}): Promise<TaskPage> {
    return this.reader.list(options);
  }

  /**
   * How many tasks are in each status (every status present, 0 when none), optionally of one
   * workflow and created in a time range. It reads every task in range: narrow it on large tables.
   *
   * @throws InvalidListOptionsError for a time that is not a Date or an ISO-8601 string
   */
  countByStatus(filter: TaskCountFilter = {}): Promise<TaskCounts> {
    return this.reader.countByStatus(filter);
  }

  /**
   * How many tasks the determinism guard holds (they are among the `pending` of countByStatus),
   * with the same workflow and time filters. Find them with `list({ held: true })`.
   *
   * @throws InvalidListOptionsError for a time that is not a Date or an ISO-8601 string
   */
  countHeld(filter: TaskCountFilter = {}): Promise<number> {
    return this.reader.countHeld(filter);
  }

  /** One step of the task by its key, with its whole input and output; null when there is none. */
  getStep(id: string, stepKey: string): Promise<StepRun | null> {
    return this.reader.getStep(id, stepKey);
  }

  /**
   * The task's steps in `getSteps` order, with previews of their input and output (the first
   * `previewChars` characters, cut in the database) instead of the values: an overview of a task
   * whose steps return MiBs stays small.
   *
   * @throws InvalidListOptionsError for `previewChars` outside 1..1,048,576
   */
  getStepSummaries(id: string, options: StepSummaryOptions = {}): Promise<StepSummary[]> {
    return this.reader.getStepSummaries(id, options);
  }

  /**
   * Counts of the task's steps, attempts, compensations and dead letters with its status, in one
   * cheap statement (no input or output read): what to poll to learn that a task changed.
   * Null when no task has this id.
   */
  getProgress(id: string): Promise<TaskProgress | null> {
    return this.reader.getProgress(id);
  }

  /**
   * Cancels a pending or running task (a running one stops before its next step, and its
   * current step's signal aborts). With `{ compensate: true }` the completed steps are undone
   * first, in this process, under a claim of its own (heartbeated, so a crash here leaves a
   * rollback that a worker resumes). A finished task cannot be cancelled.
   *
   * @throws TaskNotFoundError, TaskAlreadyFinishedError
   */
  cancel(id: string, options: CancelOptions = {}): Promise<AgentTask> {
    return this.control.cancel(id, options);
  }

  /**
   * Runs a task the determinism guard holds again, on the code deployed now: clears the hold and
   * its NonDeterminismError and wakes the workers. Call it once a deploy that takes the run's
   * recorded path is out (if the code still diverges, the guard holds the task again).
   *
   * @throws TaskNotFoundError, TaskNotHeldError
   */
  resume(id: string): Promise<AgentTask> {
    return this.control.resume(id);
  }

  /**
   * Runs a `failed` task, or a `cancelled` one whose steps were not compensated, again from where
   * it stopped, and wakes the workers: its completed steps are kept and never re-run, the step
   * that failed starts over with its full retries, its retry counter starts again at 0, and the
   * error it had goes to its `history` (`{ kind: 'retried', at, fromStatus, error }`). One
   * conditional statement: racing the reaper, a cancel or another retry, it changes the task once.
   * Resolves with the task after the move.
   *
   * @throws TaskNotFoundError, TaskNotRetryableError (any other status, a held task included; nothing written)
   */
  retry(id: string): Promise<AgentTask> {
    return this.operations.retry(id);
  }

  /**
   * A NEW task of the same workflow (its `forkedFrom` names the original and the step): the
   * steps the original recorded before `fromStep` (steps, sleeps that passed, signals taken,
   * children started, patch markers) are copied with their outputs and never run; `fromStep` and
   * what follows run anew. `input` defaults to the original's (a given one is checked as a
   * submit's), `version` to the original's. Works from a finished task (a rolled-back one
   * included) and from a running one; the task and its copied steps are written in one transaction.
   * List the forks of a task with `list({ forkedFrom: id })`.
   *
   * @throws TaskNotFoundError, UnknownStepError (a step key the original never recorded), and the
   *   errors of a submit's checks (UnknownWorkflowVersionError, InputValidationError, ...): nothing written
   */
  fork(id: string, options: ForkOptions): Promise<ForkResult> {
    return this.operations.fork(id, options);
  }

  /**
   * Cancels the pending and running tasks `filter` selects (not those already rolling back), each
   * as `cancel(id, options)` does, their unfinished children too; with `compensate`, in this process,
   * which must register their workflows. In batches of 500, one short transaction each, each task
   * changed at most once; a second identical call changes nothing. `limit`: at most that many
   * changed; `dryRun`: only counts. An empty filter is refused (pass `{ all: true }` to mean every task).
   *
   * @throws InvalidBulkFilterError, InvalidBulkOptionsError, UnknownWorkflowError (with compensate): nothing written
   */
  cancelMany(filter: BulkTaskFilter, options: BulkCancelOptions = {}): Promise<BulkResult> {
    return this.bulk.cancelMany(filter, options);
  }

  /** `retry` for every task `filter` selects (failed, or cancelled and not compensated), in batches as `cancelMany`. */
  retryMany(filter: BulkTaskFilter, options: BulkOptions = {}): Promise<BulkResult> {
    return this.bulk.retryMany(filter, options);
  }

  /** `resume` for every held task `filter` selects, in batches as `cancelMany`. */
  resumeMany(filter: BulkTaskFilter, options: BulkOptions = {}): Promise<BulkResult> {
    return this.bulk.resumeMany(filter, options);
  }

  /**
   * Sends signal `name` to the task: kept until a `ctx.waitForSignal(name)` of the task takes it
   * (signals of one name are taken in the order they were sent, one per wait); a task waiting
   * for it is woken at once. Everything is checked before anything is written.
   *
   * @throws TaskNotFoundError, TaskAlreadyFinishedError, InvalidSignalNameError,
   *   NotSerializableError (a payload JSON cannot hold), SignalPayloadTooLargeError,
   *   SignalLimitExceededError (the task keeps `signals.maxKeptPerTask` signals no wait took yet)
   */
  signal(taskId: string, name: string, payload?: unknown): Promise<SignalReceipt> {
    return this.control.signal(taskId, name, payload);
  }

  /**
   * Completes callback `callbackId` (`ctx.createCallback`'s `id`) with `payload`, as a POST to its
   * url would: the first completion wins and wakes the run waiting for it. A refusal writes nothing.
   *
   * @throws CallbackNotFoundError, CallbackAlreadyCompletedError, CallbackClosedError (expired, or
   *   its task finished), CallbackPayloadTooLargeError, InvalidCallbackPayloadError
   */
  completeCallback(callbackId: string, payload?: unknown): Promise<CallbackReceipt> {
    return this.callbacks.complete(callbackId, payload);
  }

  /** The callbacks a task's runs opened, oldest first, each with its url while open (an app with `callbacks` configured). */
  listCallbacks(taskId: string): Promise<CallbackInfo[]> {
    return this.callbacks.list(taskId);
  }

  /**
   * One page of the lines the run kept with `ctx.log`, in order (`seq` from 1), each with its step
   * key and attempt (null for a line of the workflow's body): the lines after `afterSeq`, at most
   * `limit`; `nextAfterSeq` (null on the last page) asks for the next page.
   *
   * @throws InvalidListOptionsError (afterSeq, limit)
   */
  getLogs(id: string, options: GetLogsOptions = {}): Promise<RunLogPage> {
    return this.runLogs.getLogs(id, options);
  }

  /**
   * The latest value the run set with `ctx.setEvent(key, value)`, waiting (woken by NOTIFY) until it is set.
   * @throws InvalidTalkKeyError, InvalidWaitOptionsError, TaskNotFoundError, EventTimeoutError (past timeoutMs, default 30 s)
   */
  getEvent<T = unknown>(taskId: string, key: string, options: GetEventOptions = {}): Promise<T> {
    return this.talk.getEvent<T>(taskId, key, options);
  }

  /**
   * The chunks of stream `key` after seq `after`, each once, in order, live while the run writes; it ends at
   * `ctx.closeStream(key)` or when the task ends. @throws InvalidTalkKeyError, InvalidListOptionsError; TaskNotFoundError (iterating)
   */
  readStream<T = unknown>(taskId: string, key: string, options: ReadStreamOptions = {}): AsyncIterable<StreamChunk<T>> {
    return this.talk.readStream<T>(taskId, key, options);
  }

  /**
   * One page of the signals sent to the task, in the order they were sent, with the wait that took
   * each: at most `limit` signals and at most `maxListPageBytes` of them (always at least one);
   * follow `nextCursor` (as `after`) to know whether more are left. A payload larger than
   * `maxPayloadBytes` is left out (`payloadOmitted`, with its size and a preview cut in the
   * database); read it with `getSignal`.
   *
   * @throws InvalidListOptionsError (limit, maxPayloadBytes), InvalidCursorError
   */
  listSignals(id: string, options: ListSignalsOptions = {}): Promise<SignalPage> {
    return this.reader.listSignals(id, options);
  }

  /** One signal of the task by its id, with its whole payload; null when the task has no such signal. */
  getSignal(id: string, signalId: string): Promise<TaskSignal | null> {
    return this.reader.getSignal(id, signalId);
  }

  /**
   * Every signal sent to the task with its whole payload, in the order they were sent. Its size
   * grows with the task's signals: anything that answers others (an API, a page) uses `listSignals`.
   */
  getSignals(id: string): Promise<TaskSignal[]> {
    return this.reader.getSignals(id);
  }

  /** The tasks the task started with `ctx.startChild` / `ctx.runChild`, oldest first. */
  getChildren(id: string): Promise<AgentTask[]> {
    return this.reader.getChildren(id);
  }

  /**
   * Resolves with the task once it reaches a terminal status.
   *
   * @throws InvalidWaitOptionsError (before anything is read), TaskNotFoundError, WaitForTimeoutError
   */
  waitFor(id: string, options: WaitForOptions = {}): Promise<AgentTask> {
    return this.waiter.waitFor(id, options);
  }

  /**
   * This application's schedules, by name: each one's cron and time zone, its next tick, the
   * newest tick done by any node and the task of the newest tick that started one.
   */
  listSchedules(): Promise<ScheduleInfo[]> {
    return this.schedules.list();
  }

  /** Pauses a schedule on every node (durably): no tick starts a task, none is caught up after. @throws UnknownScheduleError */
  pauseSchedule(name: string): Promise<void> {
    return this.scheduleControl.pause(name);
  }

  /** Lets a paused schedule tick again from its next tick. @throws UnknownScheduleError */
  resumeSchedule(name: string): Promise<void> {
    return this.scheduleControl.resume(name);
  }

  /** Starts the schedule's task now, outside its ticks (paused or not). @throws UnknownScheduleError */
  triggerSchedule(name: string): Promise<AgentTask> {
    return this.scheduleControl.trigger(name);
  }
}
