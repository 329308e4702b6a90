import { DuraflowError, InputViolation } from '@duraflow/nestjs';

/**
 * A request the API cannot take as sent (a property of the wrong type, an id that is no UUID,
 * an unknown status), over HTTP and gRPC alike: 400 / INVALID_ARGUMENT, like the library's
 * own bad-input errors, with the offending properties in `violations` when there are some.
 */
export class InvalidRequestError extends DuraflowError {
  readonly code = 'INVALID_REQUEST';
  constructor(
    message: string,
    readonly violations?: InputViolation[],
  ) {
    super(message);
  }
}

/** The HTTP body, or a JSON field of a gRPC request, does not parse as JSON. */
export class InvalidJsonError extends DuraflowError {
  readonly code = 'INVALID_JSON';
  constructor(what: string, reason: string) {
    super(`${what} is not valid JSON (${reason}). Send a JSON document.`);
  }
}
