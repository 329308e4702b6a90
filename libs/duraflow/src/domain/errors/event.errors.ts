import { DuraflowError } from './duraflow.error';

/** publish: the event name is not 1 to 255 characters of `[A-Za-z0-9_.:-]`, or is one of Duraflow's own. */
export class InvalidEventNameError extends DuraflowError {
  readonly code = 'INVALID_EVENT_NAME';
  constructor(
    readonly eventName: unknown,
    reason = 'must be 1 to 255 characters of letters, digits, "_", ".", ":" or "-"',
  ) {
    super(`The event name ${JSON.stringify(eventName) ?? String(eventName)} ${reason}.`);
  }
}

/** publish: the payload is not JSON, too large, or the options are wrong; nothing was written. */
export class InvalidPublishError extends DuraflowError {
  readonly code = 'INVALID_PUBLISH';
  constructor(
    readonly eventName: string,
    reason: string,
  ) {
    super(`Cannot publish "${eventName}": ${reason}.`);
  }
}

/** Boot-time: a workflow's `on`, `debounce` or `batch` is wrong. */
export class InvalidEventSubscriptionError extends DuraflowError {
  readonly code = 'INVALID_EVENT_SUBSCRIPTION';
  constructor(
    readonly workflowName: string,
    reason: string,
  ) {
    super(`Workflow "${workflowName}" subscribes wrongly: ${reason}. Fix its on / debounce / batch options (docs/events.md).`);
  }
}
