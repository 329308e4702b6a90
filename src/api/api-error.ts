import { HttpException, HttpStatus } from '@nestjs/common';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { DuraflowError, duraflowErrorResponse, duraflowErrorStatus, isTransientDatabaseError } from '@duraflow/nestjs';

/** An error as both APIs answer it: one code and message, an HTTP status and a gRPC status. */
export interface ApiError {
  http: number;
  grpc: GrpcStatus;
  code: string;
  message: string;
  details: Record<string, unknown>;
  /** Neither a typed error nor an HTTP exception: a bug to log with its stack. */
  unexpected?: boolean;
}

/** Nest's HTTP exceptions (the API-key guard, an unknown route, a body over the limit) by status. */
const HTTP_EXCEPTION_CODES: Partial<Record<number, { code: string; grpc: GrpcStatus }>> = {
  [HttpStatus.BAD_REQUEST]: { code: 'INVALID_REQUEST', grpc: GrpcStatus.INVALID_ARGUMENT },
  [HttpStatus.UNAUTHORIZED]: { code: 'UNAUTHENTICATED', grpc: GrpcStatus.UNAUTHENTICATED },
  [HttpStatus.FORBIDDEN]: { code: 'FORBIDDEN', grpc: GrpcStatus.PERMISSION_DENIED },
  [HttpStatus.NOT_FOUND]: { code: 'NOT_FOUND', grpc: GrpcStatus.NOT_FOUND },
  [HttpStatus.METHOD_NOT_ALLOWED]: { code: 'METHOD_NOT_ALLOWED', grpc: GrpcStatus.UNIMPLEMENTED },
  [HttpStatus.PAYLOAD_TOO_LARGE]: { code: 'REQUEST_TOO_LARGE', grpc: GrpcStatus.RESOURCE_EXHAUSTED },
  [HttpStatus.UNSUPPORTED_MEDIA_TYPE]: { code: 'UNSUPPORTED_MEDIA_TYPE', grpc: GrpcStatus.INVALID_ARGUMENT },
};

const DATABASE_UNAVAILABLE: ApiError = {
  http: HttpStatus.SERVICE_UNAVAILABLE,
  grpc: GrpcStatus.UNAVAILABLE,
  code: 'DATABASE_UNAVAILABLE',
  message: 'The database cannot be reached right now. Try again shortly.',
  details: {},
};

const INTERNAL_ERROR: ApiError = {
  http: HttpStatus.INTERNAL_SERVER_ERROR,
  grpc: GrpcStatus.INTERNAL,
  code: 'INTERNAL_ERROR',
  message: 'Internal error: see the engine log.',
  details: {},
  unexpected: true,
};

/**
 * What an API call answers for anything it throws. Typed errors and HTTP exceptions show their
 * message; a database outage is a 503 / UNAVAILABLE the caller may retry; anything else is a
 * 500 / INTERNAL that says nothing of the engine's insides (and is `unexpected`: log it).
 */
export function toApiError(exception: unknown): ApiError {
  if (exception instanceof DuraflowError) {
    const { code, message, details } = duraflowErrorResponse(exception);
    const status = duraflowErrorStatus(exception);
    return { http: status.http, grpc: status.grpc, code, message, details };
  }
  if (exception instanceof HttpException) {
    const http = exception.getStatus();
    const known = HTTP_EXCEPTION_CODES[http];
    if (!known && http >= 500) return INTERNAL_ERROR;
    return {
      http,
      grpc: known?.grpc ?? GrpcStatus.UNKNOWN,
      code: known?.code ?? `HTTP_${http}`,
      message: messageOf(exception),
      details: {},
    };
  }
  if (isTransientDatabaseError(exception)) return DATABASE_UNAVAILABLE;
  return INTERNAL_ERROR;
}

/** The exception's message: Nest's own (`{ message: string | string[] }`) or its text. */
function messageOf(exception: HttpException): string {
  const response = exception.getResponse();
  const message = typeof response === 'string' ? response : (response as { message?: unknown }).message;
  if (Array.isArray(message)) return message.join('; ');
  return typeof message === 'string' ? message : exception.message;
}
