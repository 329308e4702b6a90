import { DuraflowError } from './duraflow.error';

/** `submit` names a workflow that no class or functional definition in this application registers. */
export class UnknownWorkflowError extends DuraflowError {
  readonly code = 'UNKNOWN_WORKFLOW';
  constructor(
    readonly workflowName: string,
    known: string[],
  ) {
    super(
      `No workflow named "${workflowName}" is registered. ` +
        `Registered workflows: ${known.length ? known.map((n) => `"${n}"`).join(', ') : 'none'}. ` +
        `Decorate a provider with @Workflow("${workflowName}") or pass workflow("${workflowName}", fn) in DuraflowModule.forRoot({ workflows }).`,
    );
  }

  /** Without the registered workflows: an API client learns only that this one is unknown. */
  override get publicMessage(): string {
    return `No workflow named "${this.workflowName}" is registered. Check the workflow name.`;
  }
}

/** A workflow name outside `[A-Za-z0-9_-]{1,255}`. */
export class InvalidWorkflowNameError extends DuraflowError {
  readonly code = 'INVALID_WORKFLOW_NAME';
  constructor(readonly workflowName: unknown) {
    super(`Invalid workflow name ${JSON.stringify(workflowName) ?? String(workflowName)}: ` + `use 1 to 255 letters, digits, "-" or "_".`);
  }
}

export interface InputViolation {
  /** Dotted path of the offending property, e.g. `passenger.email`. */
  property: string;
  /** class-validator constraint name -> message. */
  constraints: Record<string, string>;
}

/** The input fails the workflow's class-validator DTO. */
export class InputValidationError extends DuraflowError {
  readonly code = 'INVALID_INPUT';
  constructor(
    readonly workflowName: string,
    readonly violations: InputViolation[],
  ) {
    super(
      `Input for workflow "${workflowName}" is invalid: ` +
        violations.map((v) => `${v.property}: ${Object.values(v.constraints).join(', ')}`).join('; ') +
        `. Fix these properties and submit again.`,
    );
  }
}

/** The input (or a step's output) cannot be stored as JSON without losing something. */
export class NotSerializableError extends DuraflowError {
  readonly code = 'NOT_SERIALIZABLE';
  constructor(
    readonly what: string,
    readonly path: string,
    reason: string,
  ) {
    super(
      `${what} is not JSON-serializable at ${path}: ${reason}. ` +
        `Pass plain objects, arrays, strings, finite numbers, booleans and null (dates as ISO strings).`,
    );
  }
}

/** The serialized input is over `maxInputBytes`. */
export class InputTooLargeError extends DuraflowError {
  readonly code = 'INPUT_TOO_LARGE';
  constructor(
    readonly workflowName: string,
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(
      `Input for workflow "${workflowName}" is ${bytes} bytes as JSON, over the limit of ${limit} bytes. ` +
        `Store large payloads elsewhere and pass a reference, or raise DuraflowModule's maxInputBytes.`,
    );
  }
}

/** A submit option (priority, scheduledAt, maxRetries, idempotencyKey) is out of range. */
export class InvalidSubmitOptionsError extends DuraflowError {
  readonly code = 'INVALID_SUBMIT_OPTIONS';
  constructor(
    readonly option: string,
    reason: string,
  ) {
    super(`Invalid submit option "${option}": ${reason}`);
  }
}

/** A list cursor that this service did not produce. */
export class InvalidCursorError extends DuraflowError {
  readonly code = 'INVALID_CURSOR';
  constructor() {
    super(`Invalid list cursor: pass the nextCursor of a previous list() call unchanged, or omit it.`);
  }
}

/** A list option (limit, status, cursor) is out of range. */
export class InvalidListOptionsError extends DuraflowError {
  readonly code = 'INVALID_LIST_OPTIONS';
  constructor(
    readonly option: string,
    reason: string,
  ) {
    super(`Invalid list option "${option}": ${reason}`);
  }
}

/**
 * `submit` with an idempotency key that a task of this workflow already holds, but with another
 * input: a different request reusing the key, not a retry of the first. Nothing is written.
 */
export class IdempotencyKeyConflictError extends DuraflowError {
  readonly code = 'IDEMPOTENCY_KEY_CONFLICT';
  constructor(
    readonly workflowName: string,
    readonly idempotencyKey: string,
    readonly taskId: string,
  ) {
    super(
      `Idempotency key "${idempotencyKey}" of workflow "${workflowName}" already belongs to task "${taskId}", ` +
        `which was submitted with a different input. Retry with the same input to get that task back, ` +
        `or use a new key for a new task.`,
    );
  }
}
