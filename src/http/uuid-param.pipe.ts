import { ParseUUIDPipe } from '@nestjs/common';
import { InvalidRequestError } from '../api/request.errors';

/** `:id` must be a UUID, else a 400 `INVALID_REQUEST` that names it. */
export function uuidParam(name: string): ParseUUIDPipe {
  return new ParseUUIDPipe({ exceptionFactory: () => new InvalidRequestError(`${name} must be a UUID.`) });
}
