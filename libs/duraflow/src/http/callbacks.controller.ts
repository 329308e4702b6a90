import { Controller, HttpCode, Inject, Param, Post, Req, Type, UseFilters } from '@nestjs/common';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { CallbackReceipt, TaskCallbacks } from '../services/workflows/task-callbacks';
import { CallbackRequest, readCallbackBody } from './callback-body';
import { DuraflowExceptionFilter } from './duraflow-exception.filter';

/**
 * The route a callback url points at: `POST <path>/<token>` with a JSON body. The token is the
 * credential (signed, it names the task, the callback and its expiry), so no guard of the host's
 * belongs in front of it. 202 for the completion that won; each refusal is a Duraflow error with
 * its status (404 unknown or forged, 409 completed already, 410 expired or task finished, 413,
 * 400), and writes nothing.
 */
export class CallbacksController {
  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly callbacks: TaskCallbacks,
  ) {}

  @Post(':token')
  @HttpCode(202)
  async receive(@Param('token') token: string, @Req() request: CallbackRequest): Promise<CallbackReceipt> {
    const claims = this.callbacks.claimsOf(token);
    const maxBytes = this.options.callbacks?.maxBodyBytes ?? this.options.maxInputBytes;
    return this.callbacks.completeByToken(claims, await readCallbackBody(request, maxBytes));
  }
}

/** The controller mounted at `path` (`callbacks.path`). */
export function mountCallbacksController(path: string): Type<CallbacksController> {
  @Controller(path)
  @UseFilters(DuraflowExceptionFilter)
  class MountedCallbacksController extends CallbacksController {}
  return MountedCallbacksController;
}
