import { DuraflowError } from '../domain/errors';

/** Why an event joined no debounce or batch of a workflow; recorded as that delivery's refusal, never thrown to the publisher. */
export class EventKeyRefusedError extends DuraflowError {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}
