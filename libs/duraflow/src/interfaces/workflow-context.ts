/** What a step function receives. */
export interface StepContext {
  /** Aborted when the attempt times out, the task is cancelled or its worker loses it. */
  signal: AbortSignal;
  /** 1 for the first attempt of this step, 2 for the first retry, and so on. */
  attempt: number;
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
}
