import { DuraflowError } from './duraflow.error';

/** One run used a step key twice: memoization would silently return the first output. */
export class DuplicateStepKeyError extends DuraflowError {
  readonly code = 'DUPLICATE_STEP_KEY';
  constructor(
    readonly workflowName: string,
    readonly stepKey: string,
  ) {
    super(
      `Step key "${stepKey}" was used twice in one run of workflow "${workflowName}". ` +
        `Each step of a run needs its own key: add an index or id to the key (e.g. "charge-\${i}").`,
    );
  }
}

/** A step was started from inside another step's body. */
export class NestedStepError extends DuraflowError {
  readonly code = 'NESTED_STEP';
  constructor(
    readonly stepKey: string,
    readonly parentKey: string,
  ) {
    super(
      `Step "${stepKey}" was started inside step "${parentKey}". ` +
        `Steps cannot nest: call both from the workflow's run function, one after the other.`,
    );
  }
}

/** A step was started outside a workflow run (ctx.step used after the run ended). */
export class StepOutsideRunError extends DuraflowError {
  readonly code = 'STEP_OUTSIDE_RUN';
  constructor(readonly stepKey: string) {
    super(`Step "${stepKey}" was started after its workflow run ended. Await every step inside run().`);
  }
}

/** An attempt ran past the step's `timeout`; its signal was aborted and the attempt counts as failed. */
export class StepTimeoutError extends DuraflowError {
  readonly code = 'STEP_TIMEOUT';
  constructor(
    readonly stepKey: string,
    readonly timeoutMs: number,
    readonly attempt: number,
  ) {
    super(
      `Step "${stepKey}" attempt ${attempt} timed out after ${timeoutMs} ms. ` +
        `Raise the step's timeout, or make the step honour its AbortSignal and finish sooner.`,
    );
  }
}

/** The run was cancelled or its worker lost the task: no step may start. */
export class RunAbortedError extends DuraflowError {
  readonly code = 'RUN_ABORTED';
  constructor(
    readonly taskId: string,
    readonly reason: string,
  ) {
    super(`Run of task "${taskId}" stopped: ${reason}.`);
  }
}

/** A step key outside 1..255 characters. */
export class InvalidStepKeyError extends DuraflowError {
  readonly code = 'INVALID_STEP_KEY';
  constructor(readonly stepKey: unknown) {
    super(`Invalid step key ${JSON.stringify(stepKey) ?? String(stepKey)}: use a non-empty string of at most 255 characters.`);
  }
}

/**
 * A step's or a workflow's output is over `maxOutputBytes` as JSON: nothing was stored, and the
 * step (or the run) failed as for an output JSON cannot hold.
 */
export class OutputTooLargeError extends DuraflowError {
  readonly code = 'OUTPUT_TOO_LARGE';
  constructor(
    readonly workflowName: string,
    /** The step whose output it was; undefined for the workflow's own output. */
    readonly stepKey: string | undefined,
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(
      `The output of ${stepKey === undefined ? `workflow "${workflowName}"` : `step "${stepKey}" of workflow "${workflowName}"`} ` +
        `is ${bytes} bytes as JSON, over the limit of ${limit} bytes, so it was not stored. ` +
        `Return a reference to data kept elsewhere (an id or a URL), or raise DuraflowModule's maxOutputBytes.`,
    );
  }
}
