import { DuraflowError } from './duraflow.error';

/** `ctx.waitForCallback` reached the callback's `timeoutMs` before anything was POSTed to its url. Catch it to go on without it. */
export class CallbackTimeoutError extends DuraflowError {
  readonly code = 'CALLBACK_TIMEOUT';
  constructor(
    readonly taskId: string,
    readonly callbackKey: string,
    readonly expiresAt: string | null,
  ) {
    super(
      `Task "${taskId}" waited for callback "${callbackKey}" until ${expiresAt ?? '?'} and nothing was POSTed to its url. ` +
        `Catch CallbackTimeoutError in the workflow to go on without it, or create the callback with a longer { timeoutMs }.`,
    );
  }
}

/** No callback has this id (or the token naming it is not one this deployment signed). Nothing was written. */
export class CallbackNotFoundError extends DuraflowError {
  readonly code = 'CALLBACK_NOT_FOUND';
  constructor(readonly callbackId: string) {
    super(`No callback "${callbackId}": check the id (or the url: it must be the one ctx.createCallback returned, unchanged).`);
  }
}

/** The callback was completed already (the first completion wins); this one wrote nothing. */
export class CallbackAlreadyCompletedError extends DuraflowError {
  readonly code = 'CALLBACK_ALREADY_COMPLETED';
  constructor(readonly callbackId: string) {
    super(`Callback "${callbackId}" was completed already; only the first completion counts, this one changed nothing.`);
  }
}

/** The callback's `timeoutMs` has passed, or its task has finished: it takes no completion any more. Nothing was written. */
export class CallbackClosedError extends DuraflowError {
  readonly code = 'CALLBACK_CLOSED';
  constructor(
    readonly callbackId: string,
    readonly reason: 'expired' | 'task-finished',
  ) {
    super(
      reason === 'expired'
        ? `Callback "${callbackId}" expired (its timeoutMs passed); nothing was written. The workflow decides what happens next (CallbackTimeoutError).`
        : `The task of callback "${callbackId}" has finished; nothing was written.`,
    );
  }
}

/** A callback's payload is larger than `callbacks.maxBodyBytes` as JSON. Nothing was written. */
export class CallbackPayloadTooLargeError extends DuraflowError {
  readonly code = 'CALLBACK_PAYLOAD_TOO_LARGE';
  constructor(
    readonly bytes: number,
    readonly maxBytes: number,
  ) {
    super(
      `The callback's payload is ${bytes} bytes as JSON; at most ${maxBytes} are accepted (DuraflowModule's callbacks.maxBodyBytes). ` +
        'Send a reference (an id, a URL) instead of the data.',
    );
  }
}

/** A callback's body is not JSON (or holds what PostgreSQL cannot store). Nothing was written. */
export class InvalidCallbackPayloadError extends DuraflowError {
  readonly code = 'INVALID_CALLBACK_PAYLOAD';
  constructor(readonly reason: string) {
    super(`The callback's body must be a JSON document: ${reason}`);
  }
}

/** `ctx.createCallback` in an app whose DuraflowModule has no `callbacks` option: there is no url to give. */
export class CallbacksNotConfiguredError extends DuraflowError {
  readonly code = 'CALLBACKS_NOT_CONFIGURED';
  constructor() {
    super(
      'ctx.createCallback needs DuraflowModule.forRoot({ callbacks: { baseUrl, secret } }) in every app that runs the workflow: ' +
        'the url is made from the base url and signed with the secret.',
    );
  }
}

/** `workflows.signal` with a name the library keeps for callbacks (`duraflow:callback:`): only a callback's completion sends it. */
export class ReservedSignalNameError extends DuraflowError {
  readonly code = 'RESERVED_SIGNAL_NAME';
  constructor(readonly signalName: string) {
    super(
      `Signal names starting with "duraflow:callback:" are the library's (a callback's completion); complete a callback with workflows.completeCallback.`,
    );
  }
}
