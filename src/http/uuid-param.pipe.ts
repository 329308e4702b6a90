import { BadRequestException, ParseUUIDPipe } from '@nestjs/common';

/** `:id` must be a UUID, else a 400 that names it. */
export function uuidParam(name: string): ParseUUIDPipe {
  return new ParseUUIDPipe({
    exceptionFactory: () =>
      new BadRequestException({ statusCode: 400, error: 'INVALID_REQUEST', message: `${name} must be a UUID.` }),
  });
}
