import { ArgumentsHost, Catch, ExceptionFilter, Inject, Optional } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { throwError } from 'rxjs';
import { DuraflowError } from '../domain/errors/duraflow.error';
import { duraflowErrorStatus } from '../domain/errors/error-status';

/** The body of an error response: the same four properties for every Duraflow error. */
export interface DuraflowErrorResponse {
  statusCode: number;
  /** The error's stable `code`, e.g. `UNKNOWN_WORKFLOW`. */
  code: string;
  /** What is wrong and what to do. */
  message: string;
  /** The error's own data (e.g. `violations`, `taskId`); `{}` when it has none. */
  details: Record<string, unknown>;
}

/** What a `DuraflowExceptionFilter` (and `duraflowErrorResponse`) tells API clients. */
export interface DuraflowExceptionFilterOptions {
  /**
   * Let the messages name every registered workflow (an unknown workflow's 404 lists them), as
   * the logs do: for development only. Default false: a message names only what the caller sent.
   */
  exposeWorkflowNames?: boolean;
}

/** The token a `DuraflowExceptionFilter` built by Nest (`APP_FILTER`, `@UseFilters`) takes its options from. */
export const DURAFLOW_EXCEPTION_FILTER_OPTIONS = Symbol('DURAFLOW_EXCEPTION_FILTER_OPTIONS');

/** Properties every Error has; what is left is the error's own data. */
const NOT_DETAILS = new Set(['name', 'message', 'stack', 'code', 'cause']);

/**
 * A Duraflow error as an API response body: never a stack, only the error's JSON data, and its
 * `publicMessage` (no other workflow named) unless `exposeWorkflowNames` says otherwise.
 */
export function duraflowErrorResponse(error: DuraflowError, options: DuraflowExceptionFilterOptions = {}): DuraflowErrorResponse {
  const details: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(error)) {
    if (NOT_DETAILS.has(key) || value === undefined || typeof value === 'function' || value instanceof Error) continue;
    try {
      details[key] = JSON.parse(JSON.stringify(value));
    } catch {
      // A value JSON cannot hold (a cycle, a BigInt) is left out rather than failing the response.
    }
  }
  const message = options.exposeWorkflowNames ? error.message : error.publicMessage;
  return { statusCode: duraflowErrorStatus(error).http, code: error.code, message, details };
}

/**
 * Answers every `DuraflowError` thrown by a route with its status (see `duraflowErrorStatus`)
 * and a `DuraflowErrorResponse` body: 404 for an unknown workflow or task, 409 for a finished
 * task, 400 for bad input… Works on any HTTP platform (it replies through `HttpAdapterHost`).
 * Register it with `{ provide: APP_FILTER, useClass: DuraflowExceptionFilter }`,
 * `@UseFilters(DuraflowExceptionFilter)`, or
 * `app.useGlobalFilters(new DuraflowExceptionFilter(app.get(HttpAdapterHost)))`.
 * In an RPC handler the error is passed on as `{ code, message }` with the gRPC status code.
 * The messages name no registered workflow but the one the caller sent; in development,
 * `new DuraflowExceptionFilter(adapterHost, { exposeWorkflowNames: true })` (or a provider of
 * `DURAFLOW_EXCEPTION_FILTER_OPTIONS`) lets them list every one, as the logs do.
 */
@Catch(DuraflowError)
export class DuraflowExceptionFilter implements ExceptionFilter<DuraflowError> {
  constructor(
    @Optional() private readonly adapterHost?: HttpAdapterHost,
    @Optional() @Inject(DURAFLOW_EXCEPTION_FILTER_OPTIONS) private readonly options: DuraflowExceptionFilterOptions = {},
  ) {}

  catch(error: DuraflowError, host: ArgumentsHost) {
    const body = duraflowErrorResponse(error, this.options);
    if (host.getType() !== 'http') {
      return throwError(() => ({ code: duraflowErrorStatus(error).grpc, message: body.message }));
    }
    const response = host.switchToHttp().getResponse();
    const adapter = this.adapterHost?.httpAdapter;
    if (adapter) return adapter.reply(response, body, body.statusCode);
    // Built with `new` and no HttpAdapterHost: reply as Express or Fastify would.
    if (typeof response.status === 'function' && typeof response.json === 'function') return response.status(body.statusCode).json(body);
    return response.code(body.statusCode).send(body);
  }
}
