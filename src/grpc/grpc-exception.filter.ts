import { ArgumentsHost, Catch, HttpException, HttpStatus, Logger, RpcExceptionFilter } from '@nestjs/common';
import { RpcException } from '@nestjs/microservices';
import { Metadata, status as GrpcStatus } from '@grpc/grpc-js';
import { Observable, throwError } from 'rxjs';
import { DuraflowError } from '@duraflow/nestjs';
import { apiStatusOf } from '../api/duraflow-error-status';

/** What grpc-js sends as the call's status. */
interface GrpcError {
  code: GrpcStatus;
  message: string;
  metadata?: Metadata;
}

const GRPC_BY_HTTP: Partial<Record<HttpStatus, GrpcStatus>> = {
  [HttpStatus.BAD_REQUEST]: GrpcStatus.INVALID_ARGUMENT,
  [HttpStatus.UNAUTHORIZED]: GrpcStatus.UNAUTHENTICATED,
  [HttpStatus.FORBIDDEN]: GrpcStatus.PERMISSION_DENIED,
  [HttpStatus.NOT_FOUND]: GrpcStatus.NOT_FOUND,
  [HttpStatus.CONFLICT]: GrpcStatus.FAILED_PRECONDITION,
};

/**
 * Errors as gRPC statuses: Duraflow's codes as over HTTP (NOT_FOUND, INVALID_ARGUMENT,
 * FAILED_PRECONDITION), with the input's violations in the message and, as JSON, in the
 * trailer `violations`; the error code in the trailer `error-code`.
 */
@Catch()
export class GrpcExceptionFilter implements RpcExceptionFilter {
  private readonly logger = new Logger('GrpcApi');

  catch(exception: unknown, _host: ArgumentsHost): Observable<never> {
    return throwError(() => this.toGrpcError(exception));
  }

  private toGrpcError(exception: unknown): GrpcError {
    if (exception instanceof DuraflowError) {
      const metadata = new Metadata();
      metadata.set('error-code', exception.code);
      const violations = (exception as { violations?: unknown }).violations;
      if (violations) metadata.set('violations', asciiJson(violations));
      return { code: apiStatusOf(exception.code).grpc, message: exception.message, metadata };
    }
    if (exception instanceof RpcException) {
      const error = exception.getError();
      if (typeof error === 'object' && error !== null && 'code' in error) return error as GrpcError;
      return { code: GrpcStatus.UNKNOWN, message: String(error) };
    }
    if (exception instanceof HttpException) {
      return { code: GRPC_BY_HTTP[exception.getStatus() as HttpStatus] ?? GrpcStatus.UNKNOWN, message: exception.message };
    }
    this.logger.error(exception instanceof Error ? (exception.stack ?? exception.message) : String(exception));
    return { code: GrpcStatus.INTERNAL, message: 'Internal error: see the engine log.' };
  }
}

/** Metadata values must be ASCII. */
function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
