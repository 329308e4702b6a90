import { DuraflowError } from './duraflow.error';

/** What to do instead, by the status the task is in. */
const RETRY_HINTS: Record<string, string> = {
  pending: 'It has not finished: wait for it (a held task is resumed with workflows.resume(id)).',
  running: 'It has not finished: wait for it, or cancel it first.',
  completed: 'To run it again from a step, fork it: workflows.fork(id, { fromStep }).',
};

/**
 * `workflows.retry` of a task that cannot run again from where it stopped: only a `failed` task,
 * and a `cancelled` one whose steps were not compensated, can.
 */
export class TaskNotRetryableError extends DuraflowError {
  readonly code = 'TASK_NOT_RETRYABLE';
  constructor(
    readonly taskId: string,
    readonly status: string,
  ) {
    super(
      `Task "${taskId}" is "${status}" and cannot be retried: only a failed task, or a cancelled one whose steps were not ` +
        `compensated, runs again from where it stopped. ${RETRY_HINTS[status] ?? 'To run it again from a step, fork it: workflows.fork(id, { fromStep }).'}`,
    );
  }
}

/** `workflows.fork` from a step key the original task never recorded. */
export class UnknownStepError extends DuraflowError {
  readonly code = 'FORK_STEP_UNKNOWN';
  constructor(
    readonly taskId: string,
    readonly stepKey: string,
  ) {
    super(
      `Task "${taskId}" recorded no step "${stepKey}": fork from a key its steps show (workflows.getSteps(id)); ` +
        `a step still running has no record yet.`,
    );
  }
}
