import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Inject, Logger } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { DuraflowError } from '../domain/errors';
import { duraflowErrorStatus } from '../domain/errors/error-status';
import { describeError } from '../util/describe-error';
import { DASHBOARD_OPTIONS, ResolvedDashboardOptions } from './dashboard.options';
import { DashboardResponder, page } from './dashboard-responder';
import { refusedPage } from './views/message.page';

/**
 * Whatever a dashboard route throws becomes a page: a guard's refusal (401, 403) with its own
 * message and the way to sign in, a typed error with its own, and anything unexpected (the
 * database is down) as a 500 that names a request id and nothing else: the cause, which may be
 * the database's text, is logged under that id. Never JSON: an operator's browser is on the other end. Handlers show the
 * library's typed errors themselves, next to what the operator was doing.
 */
@Catch()
export class DashboardExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('DuraflowDashboard');

  constructor(
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    private readonly responder: DashboardResponder,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const response = http.getResponse();
    const request = http.getRequest();
    const adapter = this.adapterHost.httpAdapter;
    if (adapter.isHeadersSent(response)) return;
    const method = String(adapter.getRequestMethod(request) ?? 'GET').toUpperCase();
    // Only a GET can be tried again by following a link; a refused POST starts over from the
    // dashboard. The link stays on this origin: a path, never `//host`.
    const url = String(adapter.getRequestUrl(request) ?? '');
    const retry = method === 'GET' && /^\/(?!\/)/.test(url) ? url : undefined;
    if (exception instanceof HttpException && exception.getStatus() < 500) {
      const status = exception.getStatus();
      this.responder.send(response, page(refusedPage(this.options, { status, message: messageOf(exception), retry }), status));
      return;
    }
    // A typed error (the host's global pipe refusing a parameter, say) is the caller's to read.
    if (exception instanceof DuraflowError && duraflowErrorStatus(exception).http < 500) {
      const status = duraflowErrorStatus(exception).http;
      this.responder.send(response, page(refusedPage(this.options, { status, message: exception.message, retry }), status));
      return;
    }
    // Anything else may carry the database's or a library's text: it goes to the log, under an id the page gives.
    const requestId = randomUUID();
    const error = describeError(exception);
    this.logger.error(`${method} ${String(adapter.getRequestUrl(request))} failed (request ${requestId}): ${error.message}`, error.stack);
    const message = `The dashboard could not answer. Try again in a moment; if it keeps failing, the application's log has the cause under request ${requestId}.`;
    this.responder.send(response, page(refusedPage(this.options, { status: 500, message, retry }), 500));
  }
}

/** A guard's message (`new UnauthorizedException('...')`), else the status's own text. */
function messageOf(exception: HttpException): string {
  const body = exception.getResponse();
  if (typeof body === 'string') return body;
  const message = (body as { message?: unknown }).message;
  if (Array.isArray(message)) return message.join('; ');
  return typeof message === 'string' ? message : exception.message;
}
