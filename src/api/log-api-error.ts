import { Logger } from '@nestjs/common';
import { ApiError } from './api-error';

/** During an outage every call fails the same way: one line per this long is enough. */
const OUTAGE_LOG_EVERY_MS = 10_000;
let outageLoggedAt = 0;

/**
 * A bug is logged with its stack; a database outage with its reason, at most every 10 s;
 * what the caller did wrong is not logged (the caller was told).
 */
export function logApiError(logger: Logger, exception: unknown, error: ApiError): void {
  if (error.unexpected) {
    logger.error(exception instanceof Error ? (exception.stack ?? exception.message) : String(exception));
  } else if (error.code === 'DATABASE_UNAVAILABLE' && Date.now() - outageLoggedAt >= OUTAGE_LOG_EVERY_MS) {
    outageLoggedAt = Date.now();
    logger.warn(
      `Answering ${error.code} while the database cannot be reached: ${exception instanceof Error ? exception.message : String(exception)}`,
    );
  }
}
