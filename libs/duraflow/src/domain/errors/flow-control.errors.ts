import { DuraflowError } from './duraflow.error';

/**
 * The workflow's `concurrencyKey` threw, or returned something other than a non-empty string of at
 * most 255 characters, for this input. Nothing is written.
 */
export class InvalidConcurrencyKeyError extends DuraflowError {
  readonly code = 'INVALID_CONCURRENCY_KEY';
  constructor(
    readonly workflowName: string,
    reason: string,
    cause?: unknown,
  ) {
    super(
      `The concurrencyKey of workflow "${workflowName}" ${reason} for this input: it must return a non-empty string ` +
        `of at most 255 characters. Fix the input (or the key function) and submit again.`,
    );
    if (cause !== undefined) this.cause = cause;
  }
}
