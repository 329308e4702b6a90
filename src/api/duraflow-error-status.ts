import { HttpStatus } from '@nestjs/common';
import { status as GrpcStatus } from '@grpc/grpc-js';

interface ApiStatus {
  http: HttpStatus;
  grpc: GrpcStatus;
}

const NOT_FOUND: ApiStatus = { http: HttpStatus.NOT_FOUND, grpc: GrpcStatus.NOT_FOUND };
const BAD_INPUT: ApiStatus = { http: HttpStatus.BAD_REQUEST, grpc: GrpcStatus.INVALID_ARGUMENT };

/** What each Duraflow error code means to an API caller, over HTTP and over gRPC alike. */
const STATUS_BY_CODE: Record<string, ApiStatus> = {
  UNKNOWN_WORKFLOW: NOT_FOUND,
  TASK_NOT_FOUND: NOT_FOUND,
  DEAD_LETTER_NOT_FOUND: NOT_FOUND,
  TASK_ALREADY_FINISHED: { http: HttpStatus.CONFLICT, grpc: GrpcStatus.FAILED_PRECONDITION },
  // The dead letter's compensation is not in this deployment: retrying cannot work until it is.
  COMPENSATION_NOT_REGISTERED: { http: HttpStatus.CONFLICT, grpc: GrpcStatus.FAILED_PRECONDITION },
  // Another retry of the same dead letter holds it right now.
  DEAD_LETTER_BUSY: { http: HttpStatus.CONFLICT, grpc: GrpcStatus.ABORTED },
  // The entry's task is still rolling back: discard once it has finished.
  DEAD_LETTER_TASK_ACTIVE: { http: HttpStatus.CONFLICT, grpc: GrpcStatus.FAILED_PRECONDITION },
  // The entry's step no longer exists: it can only be discarded.
  DEAD_LETTER_ORPHANED: { http: HttpStatus.CONFLICT, grpc: GrpcStatus.FAILED_PRECONDITION },
  WAIT_TIMEOUT: { http: HttpStatus.REQUEST_TIMEOUT, grpc: GrpcStatus.DEADLINE_EXCEEDED },
};

/**
 * The status of a Duraflow error code. The errors an API call can meet are the caller's
 * bad input (name, input, options, cursor), so any other code is a 400 / INVALID_ARGUMENT.
 */
export function apiStatusOf(code: string): ApiStatus {
  return STATUS_BY_CODE[code] ?? BAD_INPUT;
}
