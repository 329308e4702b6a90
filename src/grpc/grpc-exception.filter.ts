import { ArgumentsHost, Catch, Logger, RpcExceptionFilter } from '@nestjs/common';
import { Metadata } from '@grpc/grpc-js';
import { Observable, throwError } from 'rxjs';
import { toApiError } from '../api/api-error';
import { logApiError } from '../api/log-api-error';

/**
 * Every error of a gRPC call as a gRPC status, with the same meaning and code as over HTTP:
 * the code in the trailer `error-code` (always), the input's violations as JSON in the trailer
 * `violations`, the message in the status details. Never a stack or a path of this machine.
 */
@Catch()
export class GrpcExceptionFilter implements RpcExceptionFilter {
  private readonly logger = new Logger('GrpcApi');

  catch(exception: unknown, _host: ArgumentsHost): Observable<never> {
    const error = toApiError(exception);
    logApiError(this.logger, exception, error);
    const metadata = new Metadata();
    metadata.set('error-code', error.code);
    if (error.details.violations) metadata.set('violations', asciiJson(error.details.violations));
    return throwError(() => ({ code: error.grpc, message: error.message, metadata }));
  }
}

/** Metadata values must be ASCII. */
function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
