import { DuraflowError } from './duraflow.error';

/** A bulk operation's filter is empty, malformed, or names what the operation cannot change. Nothing is written. */
export class InvalidBulkFilterError extends DuraflowError {
  readonly code = 'INVALID_BULK_FILTER';
  constructor(
    readonly field: string,
    reason: string,
  ) {
    super(`Invalid bulk filter "${field}": ${reason}`);
  }
}

/** A bulk operation's option (limit, dryRun, compensate) is not of its type or range. Nothing is written. */
export class InvalidBulkOptionsError extends DuraflowError {
  readonly code = 'INVALID_BULK_OPTIONS';
  constructor(
    readonly option: string,
    reason: string,
  ) {
    super(`Invalid bulk option "${option}": ${reason}`);
  }
}
