/** The key of a stored error that holds its encoded value (the rest of the object stays readable). */
export const ENCODED_KEY = '$encoded';

/**
 * What of an error stays readable with a codec on: what says which failure it was and where,
 * never what a user's code or data put in it (the message, the stack, details, a child's error).
 */
export const READABLE_ERROR_KEYS = [
  'code',
  'name',
  'stepKey',
  'attempt',
  'attempts',
  'status',
  'childTaskId',
  'recordedStep',
  'requestedStep',
] as const;

export function readableErrorParts(value: unknown): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return {};
  const parts: Record<string, unknown> = {};
  for (const key of READABLE_ERROR_KEYS) {
    const part = (value as Record<string, unknown>)[key];
    if (typeof part === 'string' || typeof part === 'number') parts[key] = typeof part === 'string' ? part.slice(0, 200) : part;
  }
  return parts;
}
