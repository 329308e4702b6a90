import { InvalidTalkKeyError } from '../domain/errors';

/** An event or stream key: 1 to 255 characters, no NUL. @throws InvalidTalkKeyError */
export function checkTalkKey(what: 'event' | 'stream', key: unknown): asserts key is string {
  if (typeof key !== 'string' || key.length === 0 || key.length > 255 || key.includes('\0')) throw new InvalidTalkKeyError(what, key);
}
