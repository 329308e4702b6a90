import { HttpStatus } from '@nestjs/common';
import { DuraflowError } from './duraflow.error';

/**
 * gRPC status codes (the numbers of `@grpc/grpc-js`'s `status` enum, fixed by the gRPC
 * protocol), so the library maps errors for gRPC APIs without depending on a gRPC package.
 */
export const GrpcStatusCode = {
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  INTERNAL: 13,
  UNAVAILABLE: 14,
} as const;

/** What a Duraflow error means to an API caller: an HTTP status and a gRPC status code. */
export interface DuraflowErrorStatus {
  http: number;
  grpc: number;
}

const status = (http: number, grpc: number): DuraflowErrorStatus => Object.freeze({ http, grpc });
const BAD_INPUT = status(HttpStatus.BAD_REQUEST, GrpcStatusCode.INVALID_ARGUMENT);
const NOT_FOUND = status(HttpStatus.NOT_FOUND, GrpcStatusCode.NOT_FOUND);
const CONFLICT = status(HttpStatus.CONFLICT, GrpcStatusCode.FAILED_PRECONDITION);
/** A mistake in the application's own code or setup, never the caller's. */
const SERVER_FAULT = status(HttpStatus.INTERNAL_SERVER_ERROR, GrpcStatusCode.INTERNAL);

/** The one mapping every API over the library shares (the engine's HTTP and gRPC APIs, DuraflowExceptionFilter). */
const STATUS_BY_CODE: Readonly<Record<string, DuraflowErrorStatus>> = {
  INVALID_WORKFLOW_NAME: BAD_INPUT,
  INVALID_INPUT: BAD_INPUT,
  NOT_SERIALIZABLE: BAD_INPUT,
  INVALID_SUBMIT_OPTIONS: BAD_INPUT,
  INVALID_LIST_OPTIONS: BAD_INPUT,
  INVALID_BULK_FILTER: BAD_INPUT,
  INVALID_BULK_OPTIONS: BAD_INPUT,
  INVALID_CURSOR: BAD_INPUT,
  INVALID_WAIT_OPTIONS: BAD_INPUT,
  INVALID_CONCURRENCY_KEY: BAD_INPUT,
  OUTPUT_TOO_LARGE: BAD_INPUT,
  INPUT_TOO_LARGE: status(HttpStatus.PAYLOAD_TOO_LARGE, GrpcStatusCode.INVALID_ARGUMENT),
  UNKNOWN_WORKFLOW: NOT_FOUND,
  UNKNOWN_WORKFLOW_VERSION: NOT_FOUND,
  UNKNOWN_SCHEDULE: NOT_FOUND,
  // resume of a task the determinism guard does not hold.
  TASK_NOT_HELD: CONFLICT,
  TASK_NOT_FOUND: NOT_FOUND,
  DEAD_LETTER_NOT_FOUND: NOT_FOUND,
  SIGNAL_NOT_FOUND: NOT_FOUND,
  TASK_ALREADY_FINISHED: CONFLICT,
  // retry of a task that is not failed (or cancelled without compensation).
  TASK_NOT_RETRYABLE: CONFLICT,
  // fork from a step the original task never recorded.
  FORK_STEP_UNKNOWN: NOT_FOUND,
  // The same idempotency key came with another input: the first task stands.
  IDEMPOTENCY_KEY_CONFLICT: status(HttpStatus.CONFLICT, GrpcStatusCode.ALREADY_EXISTS),
  // The dead letter's compensation is not in this deployment: retrying cannot work until it is.
  COMPENSATION_NOT_REGISTERED: CONFLICT,
  // Another retry of the same dead letter holds it right now: trying again later can work.
  DEAD_LETTER_BUSY: status(HttpStatus.CONFLICT, GrpcStatusCode.ABORTED),
  // The entry's task is still rolling back: discard once it has finished.
  DEAD_LETTER_TASK_ACTIVE: CONFLICT,
  // The entry's step no longer exists: it can only be discarded.
  DEAD_LETTER_ORPHANED: CONFLICT,
  WAIT_TIMEOUT: status(HttpStatus.REQUEST_TIMEOUT, GrpcStatusCode.DEADLINE_EXCEEDED),
  // The database lacks Duraflow's migrations: the call can work once they are applied, without a restart.
  SCHEMA_NOT_READY: status(HttpStatus.SERVICE_UNAVAILABLE, GrpcStatusCode.UNAVAILABLE),
  DUPLICATE_WORKFLOW: SERVER_FAULT,
  DUPLICATE_STEP_DEFINITION: SERVER_FAULT,
  UNKNOWN_COMPENSATION_TARGET: SERVER_FAULT,
  DUPLICATE_COMPENSATION: SERVER_FAULT,
  INVALID_WORKFLOW_DEFINITION: SERVER_FAULT,
  INVALID_OPTIONS: SERVER_FAULT,
  // A boot refused: another live process runs as this worker.nodeId (never an API call's outcome).
  NODE_ID_IN_USE: SERVER_FAULT,
  DUPLICATE_STEP_KEY: SERVER_FAULT,
  NESTED_STEP: SERVER_FAULT,
  STEP_OUTSIDE_RUN: SERVER_FAULT,
  STEP_TIMEOUT: SERVER_FAULT,
  RUN_ABORTED: SERVER_FAULT,
  INVALID_STEP_KEY: SERVER_FAULT,
  COMPENSATION_TIMEOUT: SERVER_FAULT,
  INVALID_SIGNAL_NAME: BAD_INPUT,
  SIGNAL_PAYLOAD_TOO_LARGE: status(HttpStatus.PAYLOAD_TOO_LARGE, GrpcStatusCode.INVALID_ARGUMENT),
  // The task keeps as many untaken signals as it may: sending works again once its waits take some.
  SIGNAL_LIMIT_EXCEEDED: status(HttpStatus.TOO_MANY_REQUESTS, GrpcStatusCode.RESOURCE_EXHAUSTED),
  // Raised inside a workflow run, never by an API call: the workflow's own outcome.
  SIGNAL_TIMEOUT: SERVER_FAULT,
  CHILD_WORKFLOW_FAILED: SERVER_FAULT,
  INVALID_PRIMITIVE_CALL: SERVER_FAULT,
  CHILD_KEY_TAKEN: SERVER_FAULT,
  // Callbacks (ctx.createCallback): the url's POST and workflows.completeCallback.
  CALLBACK_NOT_FOUND: NOT_FOUND,
  CALLBACK_ALREADY_COMPLETED: status(HttpStatus.CONFLICT, GrpcStatusCode.ALREADY_EXISTS),
  CALLBACK_CLOSED: status(HttpStatus.GONE, GrpcStatusCode.FAILED_PRECONDITION),
  CALLBACK_PAYLOAD_TOO_LARGE: status(HttpStatus.PAYLOAD_TOO_LARGE, GrpcStatusCode.INVALID_ARGUMENT),
  INVALID_CALLBACK_PAYLOAD: BAD_INPUT,
  RESERVED_SIGNAL_NAME: BAD_INPUT,
  CALLBACK_TIMEOUT: SERVER_FAULT,
  CALLBACKS_NOT_CONFIGURED: SERVER_FAULT,
  // A stored payload no configured key opens: the deployment's codec lacks a key (never the caller's mistake).
  PAYLOAD_UNREADABLE: SERVER_FAULT,
  // getEvent's wait ended before the run set the event (as waitFor's WAIT_TIMEOUT): asking again can work.
  EVENT_TIMEOUT: status(HttpStatus.REQUEST_TIMEOUT, GrpcStatusCode.DEADLINE_EXCEEDED),
  // Raised inside a workflow run (ctx.writeStream), never by an API call.
  STREAM_LIMIT: SERVER_FAULT,
  STREAM_CLOSED: SERVER_FAULT,
  // Events that start workflows (workflows.publish, POST /events/:name).
  INVALID_EVENT_NAME: BAD_INPUT,
  INVALID_PUBLISH: BAD_INPUT,
  INVALID_EVENT_SUBSCRIPTION: SERVER_FAULT,
};

/**
 * The status of a Duraflow error (or of its `code`). A code the table does not list is the
 * caller's bad input (400 / INVALID_ARGUMENT): every error an API call meets that is not
 * listed above is a check of what the caller sent.
 */
export function duraflowErrorStatus(error: DuraflowError | string): DuraflowErrorStatus {
  return STATUS_BY_CODE[typeof error === 'string' ? error : error.code] ?? BAD_INPUT;
}
