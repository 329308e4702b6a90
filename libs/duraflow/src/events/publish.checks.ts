import { EVENT_NAME_PATTERN, OWN_EVENT_PREFIX } from '../domain/event-options';
import { InvalidEventNameError, InvalidPublishError } from '../domain/errors';
import { toJson } from '../util/json';
import { checkStorableJson } from '../validation/storable-text';

/**
 * A publish's name, payload and key, checked before anything is written.
 * @throws InvalidEventNameError, InvalidPublishError, NotSerializableError
 */
export function checkPublish(
  name: string,
  payload: unknown,
  options: { idempotencyKey?: string },
  limits: { maxJsonDepth: number; maxInputBytes: number },
): { payloadJson: string; idempotencyKey: string | null } {
  if (typeof name !== 'string' || !EVENT_NAME_PATTERN.test(name)) throw new InvalidEventNameError(name);
  if (name.startsWith(OWN_EVENT_PREFIX)) {
    throw new InvalidEventNameError(name, `starts with "${OWN_EVENT_PREFIX}", which Duraflow's own events use: choose another name`);
  }
  const what = `The payload of event "${name}"`;
  const payloadJson = toJson(payload === undefined ? {} : payload, what, limits.maxJsonDepth)!;
  const bytes = Buffer.byteLength(payloadJson, 'utf8');
  if (bytes > limits.maxInputBytes) {
    throw new InvalidPublishError(
      name,
      `the payload is ${bytes} bytes, over the limit of ${limits.maxInputBytes} (DuraflowModule's maxInputBytes)`,
    );
  }
  checkStorableJson(payloadJson, what);
  const key = options.idempotencyKey;
  if (key !== undefined && key !== null && (typeof key !== 'string' || key.length < 1 || key.length > 255 || key.includes('\u0000'))) {
    throw new InvalidPublishError(name, 'idempotencyKey must be a string of 1 to 255 characters (no NUL)');
  }
  return { payloadJson, idempotencyKey: key ?? null };
}
