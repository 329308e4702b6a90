import { ArgumentsHost, Catch, ExceptionFilter, Logger } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { DuraflowErrorResponse } from '@duraflow/nestjs';
import { toApiError } from '../api/api-error';
import { logApiError } from '../api/log-api-error';

/**
 * Everything an HTTP call can fail with that is not a Duraflow error (those go through the
 * library's DuraflowExceptionFilter): the API-key guard's 401, an unknown route, a body over
 * the limit, a database outage (503), a bug (500). Each is answered in the same shape,
 * `{ statusCode, code, message, details }`, and never with a stack, a path of this machine or
 * the database's text: a 500 names a request id (`details.requestId`), and the log has the
 * cause under it.
 */
@Catch()
export class ApiExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('HttpApi');

  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const error = toApiError(exception);
    const body: DuraflowErrorResponse = { statusCode: error.http, code: error.code, message: error.message, details: error.details };
    if (error.unexpected) {
      const requestId = randomUUID();
      const cause = exception instanceof Error ? (exception.stack ?? exception.message) : String(exception);
      this.logger.error(`Request ${requestId} failed: ${cause}`);
      body.message = `Internal error: the engine's log has the cause under request ${requestId}.`;
      body.details = { requestId };
    } else {
      logApiError(this.logger, exception, error);
    }
    this.adapterHost.httpAdapter.reply(host.switchToHttp().getResponse(), body, error.http);
  }
}
