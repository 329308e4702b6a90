import { createHash } from 'node:crypto';

/**
 * The effect key of step `stepKey` of task `taskId`: a UUIDv5 (RFC 9562, SHA-1) whose namespace
 * is the task id and whose name is the step key (UTF-8). Derived, never stored: the same on every
 * attempt, after any recovery and in any process, different for every step and every task (a
 * fork's steps run under the fork's own id, so they get new keys). 36 characters, the form most
 * providers' idempotency headers accept.
 */
export function effectKey(taskId: string, stepKey: string): string {
  const namespace = Buffer.from(taskId.replace(/-/g, ''), 'hex');
  const hash = createHash('sha1').update(namespace).update(stepKey, 'utf8').digest();
  hash[6] = (hash[6] & 0x0f) | 0x50; // version 5
  hash[8] = (hash[8] & 0x3f) | 0x80; // RFC variant
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}
