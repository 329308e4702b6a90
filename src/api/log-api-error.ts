import { Logger } from '@nestjs/common';
import { ApiError } from './api-error';

/** A bug is logged with its stack; a database outage with its reason; what the caller did wrong is not logged. */
export function logApiError(logger: Logger, exception: unknown, error: ApiError): void {
  if (error.unexpected) {
    logger.error(exception instanceof Error ? (exception.stack ?? exception.message) : String(exception));
  } else if (error.code === 'DATABASE_UNAVAILABLE') {
    logger.warn(`Answered ${error.http} ${error.code}: ${exception instanceof Error ? exception.message : String(exception)}`);
  }
}
