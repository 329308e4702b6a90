import { Inject, Injectable } from '@nestjs/common';
import { ResolvedDuraflowOptions } from '../../config/resolved-options';
import { RESOLVED_DURAFLOW_OPTIONS, UUID_PATTERN } from '../../domain/duraflow.constants';
import {
  CallbackAlreadyCompletedError,
  CallbackClosedError,
  CallbackNotFoundError,
  CallbackPayloadTooLargeError,
  InvalidCallbackPayloadError,
  NotSerializableError,
} from '../../domain/errors';
import { CallbackStore, TaskCallback } from '../../persistence/callback.store';
import { TaskTransitions } from '../../persistence/lifecycle/task-transitions';
import { CallbackClaims, callbackUrl, verifyCallbackToken } from '../../util/callback-token';
import { toJson } from '../../util/json';
import { checkStorableJson } from '../../validation/storable-text';

/** A callback as `workflows.listCallbacks` returns it: with its url while it is open (and the app configured for callbacks). */
export interface CallbackInfo extends TaskCallback {
  url: string | null;
}

/** A completion that won. */
export interface CallbackReceipt {
  callbackId: string;
  taskId: string;
}

/**
 * Completing callbacks (from server code, or a POST to a callback url: http/callbacks.controller.ts)
 * and reading a task's. Everything is checked before anything is written; the completion is the
 * lifecycle's move (lifecycle/complete-callback.ts), and each refusal its typed error.
 */
@Injectable()
export class TaskCallbacks {
  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly store: CallbackStore,
    private readonly transitions: TaskTransitions,
  ) {}

  /** @throws CallbackNotFoundError, CallbackAlreadyCompletedError, CallbackClosedError, CallbackPayloadTooLargeError, NotSerializableError */
  async complete(callbackId: string, payload: unknown): Promise<CallbackReceipt> {
    const json = this.payloadJson(payload);
    const found = typeof callbackId === 'string' && UUID_PATTERN.test(callbackId) ? await this.store.find(callbackId) : null;
    if (!found) throw new CallbackNotFoundError(String(callbackId));
    return this.completeFound(found.id, found.taskId, json);
  }

  /** What a callback url's token names, when this deployment signed it; else CallbackNotFoundError, as for an unknown callback. */
  claimsOf(token: string): CallbackClaims {
    const settings = this.options.callbacks;
    const claims = settings && typeof token === 'string' ? verifyCallbackToken(settings.secret, token) : null;
    if (!claims || !UUID_PATTERN.test(claims.callbackId) || !UUID_PATTERN.test(claims.taskId)) throw new CallbackNotFoundError('(url)');
    return claims;
  }

  /** A POST to a callback url whose token `claimsOf` read; `body` is the request's text. */
  async completeByToken(claims: CallbackClaims, body: string): Promise<CallbackReceipt> {
    const bytes = Buffer.byteLength(body, 'utf8');
    if (bytes > this.maxBytes) throw new CallbackPayloadTooLargeError(bytes, this.maxBytes);
    let payload: unknown;
    try {
      payload = JSON.parse(body);
    } catch (error) {
      throw new InvalidCallbackPayloadError((error as Error).message);
    }
    return this.completeFound(claims.callbackId, claims.taskId, this.payloadJson(payload));
  }

  /** The task's callbacks, oldest first. */
  async list(taskId: string): Promise<CallbackInfo[]> {
    if (typeof taskId !== 'string' || !UUID_PATTERN.test(taskId)) return [];
    const settings = this.options.callbacks;
    return (await this.store.listForTask(taskId)).map((callback) => ({
      ...callback,
      url:
        settings && callback.status === 'open'
          ? callbackUrl(settings, {
              taskId: callback.taskId,
              callbackId: callback.id,
              key: callback.key,
              expiresAt: callback.expiresAt ? callback.expiresAt.getTime() : null,
            })
          : null,
    }));
  }

  private async completeFound(callbackId: string, taskId: string, json: string | null): Promise<CallbackReceipt> {
    const outcome = await this.transitions.completeCallback(callbackId, taskId, json);
    switch (outcome) {
      case 'completed':
        return { callbackId, taskId };
      case 'not-found':
        throw new CallbackNotFoundError(callbackId);
      case 'already-completed':
        throw new CallbackAlreadyCompletedError(callbackId);
      case 'expired':
      case 'task-finished':
        throw new CallbackClosedError(callbackId, outcome);
    }
  }

  /** The payload as the JSON to store, within the body limit. */
  private payloadJson(payload: unknown): string | null {
    let json: string | undefined;
    try {
      json = toJson(payload, "The callback's payload", this.options.maxJsonDepth);
      checkStorableJson(json, "The callback's payload");
    } catch (error) {
      if (error instanceof NotSerializableError) throw new InvalidCallbackPayloadError(error.message);
      throw error;
    }
    const bytes = json === undefined ? 0 : Buffer.byteLength(json, 'utf8');
    if (bytes > this.maxBytes) throw new CallbackPayloadTooLargeError(bytes, this.maxBytes);
    return json ?? null;
  }

  private get maxBytes(): number {
    return this.options.callbacks?.maxBodyBytes ?? this.options.maxInputBytes;
  }
}
