import { DuraflowError } from './duraflow.error';

/** A compensation attempt ran past its timeout; its signal was aborted and the attempt counts as failed. */
export class CompensationTimeoutError extends DuraflowError {
  readonly code = 'COMPENSATION_TIMEOUT';
  constructor(
    readonly stepKey: string,
    readonly timeoutMs: number,
    readonly attempt: number,
  ) {
    super(
      `The compensation of step "${stepKey}" (attempt ${attempt}) timed out after ${timeoutMs} ms. ` +
        `Raise its timeout (@Compensate(key, { timeout }) or the "compensation" option), or make it honour its AbortSignal.`,
    );
  }
}

/**
 * `step_runs.compensation_fn` names no compensation that the task's own workflow, registered in
 * this process, defines for that step (a name of another workflow or another step never resolves).
 */
export class CompensationNotRegisteredError extends DuraflowError {
  readonly code = 'COMPENSATION_NOT_REGISTERED';
  constructor(
    readonly compensationFn: string,
    readonly stepKey: string,
    readonly workflowName?: string,
  ) {
    super(
      `The compensation "${compensationFn}" of step "${stepKey}"${workflowName ? ` of workflow "${workflowName}"` : ''} is not registered in this process. ` +
        `Deploy the workflow that defines it (same workflow name, same @Compensate method or compensations key for this step) and retry.`,
    );
  }
}

/** No dead letter has this id (never existed, or already retried successfully or discarded). */
export class DeadLetterNotFoundError extends DuraflowError {
  readonly code = 'DEAD_LETTER_NOT_FOUND';
  constructor(readonly deadLetterId: string) {
    super(
      `No dead letter with id "${deadLetterId}". It may have been retried successfully or discarded: list them with listDeadLetters().`,
    );
  }
}

/** Another retry of this dead letter is running now. */
export class DeadLetterBusyError extends DuraflowError {
  readonly code = 'DEAD_LETTER_BUSY';
  constructor(readonly deadLetterId: string) {
    super(`Dead letter "${deadLetterId}" is being retried right now by another call. Wait for it to finish, then list it again.`);
  }
}

/** The entry's task is still rolling back: discarding now would let the rollback run that compensation again. */
export class DeadLetterTaskActiveError extends DuraflowError {
  readonly code = 'DEAD_LETTER_TASK_ACTIVE';
  constructor(
    readonly deadLetterId: string,
    readonly taskId: string,
    readonly status: string,
  ) {
    super(
      `Dead letter "${deadLetterId}" belongs to task "${taskId}", which is still ${status} (its rollback is not over). ` +
        `Wait until the task is finished, then discard it.`,
    );
  }
}

/** The entry's step no longer exists (its task was deleted): there is no saved output to compensate. */
export class DeadLetterOrphanedError extends DuraflowError {
  readonly code = 'DEAD_LETTER_ORPHANED';
  constructor(readonly deadLetterId: string) {
    super(
      `Dead letter "${deadLetterId}" refers to a step that no longer exists (its task was deleted), so it cannot be retried. Discard it.`,
    );
  }
}
