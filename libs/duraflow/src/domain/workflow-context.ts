/** What a step function receives. */
export interface StepContext {
  /** Aborted when the attempt times out, the task is cancelled or its worker loses it. */
  signal: AbortSignal;
  /** 1 for the first attempt of this step, 2 for the first retry, and so on. */
  attempt: number;
  /**
   * One value per (task, step key), the same on every attempt, after any recovery and in any
   * process: pass it as a provider's idempotency key. A UUIDv5 of the step key in the task id's
   * namespace (derived, not stored); a fork's steps get new ones (the fork is another task).
   */
  effectKey: string;
}

export interface BackoffOptions {
  /** Delay before the first retry. Default 100 ms. */
  initialDelayMs?: number;
  /** Growth per retry. Default 2. */
  factor?: number;
  /** Upper bound of one delay. Default 30 s. */
  maxDelayMs?: number;
}

export interface StepOptions {
  /** Retries after the first attempt: up to `retries + 1` attempts. Default 0. */
  retries?: number;
  /** Milliseconds one attempt may take; past it the attempt's signal aborts and it counts as failed. */
  timeout?: number;
  /** Exponential backoff with jitter between attempts. */
  backoff?: BackoffOptions;
  /**
   * Write the step's row `running` (with `started_at`) before each attempt's body runs, fenced
   * on the run's claim: after a crash the step is listed as "started, never finished" with its
   * effect key. Costs one write per attempt. Default false.
   */
  recordStart?: boolean;
}

/** `ctx.log`: debug | info | warn | error, each `(message, metadata?)`. */
export interface RunLogger {
  debug(message: string, metadata?: Record<string, unknown>): void;
  info(message: string, metadata?: Record<string, unknown>): void;
  warn(message: string, metadata?: Record<string, unknown>): void;
  error(message: string, metadata?: Record<string, unknown>): void;
}

/** Runs memoized steps: `run` executes `fn` once per task and returns the saved output afterwards. */
export interface StepRunner {
  run<T>(key: string, fn: (step: StepContext) => T | Promise<T>, options?: StepOptions): Promise<T>;
}

/** The argument of a workflow's entry point. */
export interface WorkflowContext<TInput = any> {
  /** The task id. */
  readonly runId: string;
  readonly workflowName: string;
  readonly input: TInput;
  readonly step: StepRunner;
  /** 1 on the first execution of the task, 2 after the first recovery, and so on. */
  readonly attempt: number;
  /** Aborted when the task is cancelled or this worker loses it. */
  readonly signal: AbortSignal;
  /**
   * The run's log: `ctx.log.info('charged', { amount })`. Each line goes to Nest's Logger (with
   * the task id) and is kept with the run (`workflows.getLogs`), written with the run's next
   * checkpoint; inside a step it carries the step's key and attempt.
   */
  readonly log: RunLogger;
  /**
   * Sets event `key` to `value` (JSON), its latest value for `workflows.getEvent(runId, key)`,
   * which wakes its waiters. Written at once, fenced on the run's claim; a call of the workflow's
   * body only (inside a step it throws). A recovered run going through its recorded path again
   * never sets an older value again: each call is placed by its position in the run's body.
   */
  setEvent(key: string, value: unknown): Promise<void>;
  /**
   * Appends `chunk` (JSON) to stream `key` (`workflows.readStream(runId, key)`). Inside a step the
   * chunk is written with the step's checkpoint (a step run again after a crash never repeats
   * one); in the body it is queued and group committed in order before the run's next event,
   * close, checkpoint, wait or end, once per position in the body (a replay repeats none). Bounded by the `streams` option (StreamLimitError); after closeStream StreamClosedError.
   */
  writeStream(key: string, chunk: unknown): Promise<void>;
  /** Closes stream `key`: its readers end once they have read every chunk. A call of the workflow's body only. */
  closeStream(key: string): Promise<void>;
  /**
   * For changing a workflow's code in place: true for a run that reaches this point for the first
   * time on code that has the patch, false for a run that was already past it before the patch
   * existed. The answer is recorded (step_runs row `patch:<id>`) and never changes for the run.
   * `if (ctx.patched('send-sms')) await ctx.step.run('sms', …)`.
   */
  patched(patchId: string): boolean;
  /**
   * Retires a patch whose old branch was removed: a run that recorded `patched(patchId)` as false
   * needed that branch, so the determinism guard holds it (NonDeterminismError); others go on.
   */
  deprecatePatch(patchId: string): void;

  /**
   * Sleeps `ms` milliseconds, durably: the task goes back to `pending` until then, holding no
   * slot, worker or heartbeat, and resumes on any worker without re-running completed steps.
   * Memoized under `key` (one namespace with step keys): a run that passed it never sleeps again.
   */
  sleep(key: string, ms: number): Promise<void>;
  /** `sleep` until `date` (a Date or an ISO-8601 string); a date in the past returns at once. */
  sleepUntil(key: string, date: Date | string): Promise<void>;
  /**
   * Resolves with the payload of the oldest signal `name` sent to this task and not yet taken
   * by another wait (`workflows.signal(taskId, name, payload)`); a signal sent before the wait is
   * kept for it. Meanwhile the task is `pending` and holds no slot. Past `timeoutMs` it throws
   * SignalTimeoutError (catch it to go on without the signal). Each wait of one name takes the
   * next signal of that name, in the order they were sent.
   */
  waitForSignal<T = unknown>(name: string, options?: SignalWaitOptions): Promise<T>;
  /**
   * Starts workflow `workflowName` as a child of this task, exactly once per `key` (a crash
   * between starting it and recording it never makes two), and returns its id.
   */
  startChild<TInput = unknown>(key: string, workflowName: string, input?: TInput, options?: ChildWorkflowOptions): Promise<{ id: string }>;
  /**
   * `startChild`, then waits (holding no slot) until the child ends: resolves with its output,
   * or throws ChildWorkflowFailedError carrying its error when it ends otherwise.
   */
  runChild<TOutput = unknown, TInput = unknown>(
    key: string,
    workflowName: string,
    input?: TInput,
    options?: ChildWorkflowOptions,
  ): Promise<TOutput>;
  /**
   * Opens a callback: a url (`forRoot({ callbacks })`) whose first valid POST of a JSON body
   * completes it. Memoized under `key` (recorded as the step `callback:<key>`): a replay or a
   * recovery returns the same id and url.
   */
  createCallback(key: string, options?: CallbackOptions): Promise<CallbackHandle>;
  /**
   * Resolves with the JSON POSTed to the callback's url (or passed to `workflows.completeCallback`),
   * waiting as `waitForSignal` does: the task is `pending` and holds no slot meanwhile. Past the
   * callback's `timeoutMs` it throws CallbackTimeoutError. Once per callback in a run.
   */
  waitForCallback<T = unknown>(callback: CallbackHandle): Promise<T>;
}

/** `ctx.createCallback`'s options. */
export interface CallbackOptions {
  /** Past this many milliseconds the url takes no POST (410) and `waitForCallback` throws CallbackTimeoutError. Default: never. */
  timeoutMs?: number;
}

/** A callback a run opened (`ctx.createCallback`): hand `url` to whoever will POST the JSON the run waits for. */
export interface CallbackHandle {
  readonly id: string;
  /** `<baseUrl><path>/<token>`: the signed token names the task, the callback and its expiry. Whoever holds it can complete it. */
  readonly url: string;
  readonly key: string;
  /** ISO-8601; null: never. */
  readonly expiresAt: string | null;
}

export interface SignalWaitOptions {
  /** Give up after this many milliseconds (SignalTimeoutError). Default: wait for ever. */
  timeoutMs?: number;
}

/** How a child task is submitted (as `submit`'s options; its idempotency key is derived from the parent and the key). */
export interface ChildWorkflowOptions {
  priority?: number;
  scheduledAt?: Date | string;
  maxRetries?: number;
  /** The child's tags; left out, it takes its parent's. */
  tags?: Record<string, string>;
}
