import { InvalidSubmitOptionsError } from '../domain/errors';

/** submit's `version`: undefined (the newest registered) or a whole number from 1. @throws InvalidSubmitOptionsError */
export function checkVersionOption(version: unknown): number | undefined {
  if (version === undefined || version === null) return undefined;
  if (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 1 || version > 2_147_483_647) {
    throw new InvalidSubmitOptionsError(
      'version',
      `must be a whole number from 1 (a version this application registers), got ${String(version)}.`,
    );
  }
  return version;
}
