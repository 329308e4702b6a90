import { InvalidSignalNameError, ReservedSignalNameError, SignalPayloadTooLargeError } from '../domain/errors';
import { isCallbackSignalName } from '../domain/reserved-keys';
import { SIGNAL_NAME_PATTERN } from '../domain/duraflow.constants';
import { toJson } from '../util/json';
import { checkStorableJson } from './storable-text';

/**
 * A signal's name and payload, checked before anything is written: the name against
 * SIGNAL_NAME_PATTERN, the payload as JSON (as a submit's input is) within `maxInputBytes`.
 * Returns the payload's JSON (undefined for an undefined payload).
 *
 * @throws InvalidSignalNameError, NotSerializableError (also for what PostgreSQL cannot store), SignalPayloadTooLargeError
 */
export function checkSignal(name: unknown, payload: unknown, limits: { maxJsonDepth: number; maxInputBytes: number }): string | undefined {
  if (typeof name !== 'string' || !SIGNAL_NAME_PATTERN.test(name)) throw new InvalidSignalNameError(name);
  if (isCallbackSignalName(name)) throw new ReservedSignalNameError(name);
  const json = toJson(payload, `The payload of signal "${name}"`, limits.maxJsonDepth);
  const bytes = json === undefined ? 0 : Buffer.byteLength(json, 'utf8');
  if (bytes > limits.maxInputBytes) throw new SignalPayloadTooLargeError(name, bytes, limits.maxInputBytes);
  checkStorableJson(json, `The payload of signal "${name}"`);
  return json;
}
