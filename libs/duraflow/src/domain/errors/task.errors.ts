import { DuraflowError } from './duraflow.error';

/** No task has this id. */
export class TaskNotFoundError extends DuraflowError {
  readonly code = 'TASK_NOT_FOUND';
  constructor(readonly taskId: string) {
    super(`No task with id "${taskId}". Check the id returned by submit().`);
  }
}

/** The task already reached a terminal status, which never changes again. */
export class TaskAlreadyFinishedError extends DuraflowError {
  readonly code = 'TASK_ALREADY_FINISHED';
  constructor(
    readonly taskId: string,
    readonly status: string,
    action = 'cancelled',
  ) {
    super(`Task "${taskId}" already finished with status "${status}" and cannot be ${action}.`);
  }
}

/** `waitFor` gave up before the task reached a terminal status. */
export class WaitForTimeoutError extends DuraflowError {
  readonly code = 'WAIT_TIMEOUT';
  constructor(
    readonly taskId: string,
    readonly timeoutMs: number,
    readonly lastStatus: string,
  ) {
    super(
      `Task "${taskId}" was still "${lastStatus}" after ${timeoutMs} ms. ` +
        `Wait longer (waitFor(id, { timeoutMs })) or check that a worker serves this workflow.`,
    );
  }
}

/** A `waitFor` option is not a whole number in its range (NaN, Infinity or a huge value would never time out, or poll in a loop). */
export class InvalidWaitOptionsError extends DuraflowError {
  readonly code = 'INVALID_WAIT_OPTIONS';
  constructor(
    readonly option: string,
    reason: string,
  ) {
    super(`Invalid waitFor option "${option}": ${reason}`);
  }
}
