import { DuraflowError } from './duraflow.error';

/** `ctx.waitForSignal` reached its `timeoutMs` before a signal of its name came. Catch it to go on without the signal. */
export class SignalTimeoutError extends DuraflowError {
  readonly code = 'SIGNAL_TIMEOUT';
  constructor(
    readonly taskId: string,
    readonly signalName: string,
    readonly timeoutMs: number | null,
  ) {
    super(
      `Task "${taskId}" waited ${timeoutMs ?? '?'} ms for signal "${signalName}" and none came. ` +
        `Catch SignalTimeoutError in the workflow to go on without it, or wait longer ({ timeoutMs }).`,
    );
  }
}

/** The child of `ctx.runChild` ended without completing; `childError` is its error, `status` its final status. */
export class ChildWorkflowFailedError extends DuraflowError {
  readonly code = 'CHILD_WORKFLOW_FAILED';
  constructor(
    readonly childTaskId: string,
    readonly workflowName: string,
    readonly status: string,
    readonly childError: unknown,
  ) {
    const reason = (childError as { message?: string } | null)?.message;
    super(
      `Child workflow "${workflowName}" (task "${childTaskId}") ended ${status}${reason ? `: ${reason}` : ''}. ` +
        `Catch ChildWorkflowFailedError in the parent to handle it; its childError holds the child's error.`,
    );
  }
}

/** A signal name outside `[A-Za-z0-9_.:-]{1,200}`. */
export class InvalidSignalNameError extends DuraflowError {
  readonly code = 'INVALID_SIGNAL_NAME';
  constructor(readonly signalName: unknown) {
    super(`Invalid signal name ${JSON.stringify(signalName) ?? String(signalName)}: use 1 to 200 letters, digits, ".", ":", "-" or "_".`);
  }
}

/** A signal's payload is larger than `maxInputBytes` as JSON. */
export class SignalPayloadTooLargeError extends DuraflowError {
  readonly code = 'SIGNAL_PAYLOAD_TOO_LARGE';
  constructor(
    readonly signalName: string,
    readonly bytes: number,
    readonly maxBytes: number,
  ) {
    super(
      `The payload of signal "${signalName}" is ${bytes} bytes as JSON; at most ${maxBytes} are accepted (DuraflowModule's maxInputBytes). ` +
        `Send a reference (an id, a URL) instead of the data.`,
    );
  }
}

/**
 * The task already keeps `maxKeptPerTask` signals that no wait has taken: the send wrote nothing.
 * Sending works again once the workflow's waits take some (or the task ends).
 */
export class SignalLimitExceededError extends DuraflowError {
  readonly code = 'SIGNAL_LIMIT_EXCEEDED';
  constructor(
    readonly taskId: string,
    readonly signalName: string,
    readonly maxKeptPerTask: number,
  ) {
    super(
      `Task "${taskId}" already keeps ${maxKeptPerTask} signals no wait has taken; signal "${signalName}" was not kept ` +
        `(DuraflowModule's signals.maxKeptPerTask). Send again once the workflow's waits have taken some, or check why it does not wait for them.`,
    );
  }
}

/** The task has no signal of this id (an API's read of one signal). */
export class SignalNotFoundError extends DuraflowError {
  readonly code = 'SIGNAL_NOT_FOUND';
  constructor(
    readonly taskId: string,
    readonly signalId: string,
  ) {
    super(`Task "${taskId}" has no signal with id "${signalId}". Use a signalId from the task's list of signals.`);
  }
}

/** A durable primitive was called with a value it cannot use (a sleep of NaN ms, an invalid date, a negative timeout). */
export class InvalidPrimitiveCallError extends DuraflowError {
  readonly code = 'INVALID_PRIMITIVE_CALL';
  constructor(
    readonly call: string,
    reason: string,
  ) {
    super(`${call}: ${reason}`);
  }
}

/**
 * `ctx.startChild` / `ctx.runChild`: a task that is not this step's child already holds the
 * child's idempotency key (a task created under the reserved `duraflow-child:` prefix before the
 * library refused it to callers). The parent does not take it for its child; nothing is written.
 */
export class ChildKeyTakenError extends DuraflowError {
  readonly code = 'CHILD_KEY_TAKEN';
  constructor(
    readonly parentTaskId: string,
    readonly stepKey: string,
    readonly workflowName: string,
    readonly holderTaskId: string,
  ) {
    super(
      `The child of step "${stepKey}" of task "${parentTaskId}" cannot start: task "${holderTaskId}" of workflow "${workflowName}" ` +
        `holds its idempotency key but is not that step's child. Cancel that task (an idempotency key starting with ` +
        `"duraflow-child:" was not the library's), then retry the parent.`,
    );
  }
}
