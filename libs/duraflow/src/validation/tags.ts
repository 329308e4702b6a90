import { hasNul, NUL_REASON } from './storable-text';

/**
 * A task's tags (`submit(..., { tags })`, the `tags` filter of list, count and the bulk
 * operations): string keys and values, at most MAX_TAGS of them, a key of 1 to 64 characters of
 * `[A-Za-z0-9_.-]`, a value of at most 256 characters without NUL. Stored as a jsonb object in
 * `agent_tasks.tags`; a filter is an AND of its pairs, `tags @> $1` (idx_agent_tasks_tags).
 */

export const MAX_TAGS = 16;
export const MAX_TAG_KEY_LENGTH = 64;
export const MAX_TAG_VALUE_LENGTH = 256;
const TAG_KEY = /^[A-Za-z0-9_.-]{1,64}$/;

/** What a checked set of tags is refused with: the caller's typed error for the option `tags`. */
export type TagsError = (reason: string) => Error;

/**
 * The tags as a plain object of strings, or `undefined` when left out (null and undefined alike).
 * @throws the error `refuse` makes, naming what is wrong and how to fix it
 */
export function checkTags(value: unknown, refuse: TagsError): Record<string, string> | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'object' || Array.isArray(value) || value instanceof Date) {
    throw refuse(`must be an object of string keys and string values such as { tenant: 'acme' }, got ${describe(value)}.`);
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > MAX_TAGS) throw refuse(`must hold at most ${MAX_TAGS} tags, got ${entries.length}.`);
  const tags: Record<string, string> = {};
  for (const [key, tagValue] of entries) {
    if (!TAG_KEY.test(key)) {
      throw refuse(`key "${key.slice(0, 80)}" must be 1 to ${MAX_TAG_KEY_LENGTH} characters of A-Z, a-z, 0-9, "_", "." and "-".`);
    }
    if (typeof tagValue !== 'string') throw refuse(`value of "${key}" must be a string, got ${describe(tagValue)}.`);
    if (tagValue.length > MAX_TAG_VALUE_LENGTH) {
      throw refuse(`value of "${key}" must be at most ${MAX_TAG_VALUE_LENGTH} characters, got ${tagValue.length}.`);
    }
    if (hasNul(tagValue)) throw refuse(`value of "${key}" ${NUL_REASON}`);
    tags[key] = tagValue;
  }
  return tags;
}

/**
 * Tags written as `key:value` pairs (HTTP `?tag=tenant:acme`, the CLI's `--tag tenant:acme`): the
 * first colon splits; a key given twice is refused. @throws the error `refuse` makes
 */
export function parseTagPairs(pairs: readonly string[], refuse: TagsError): Record<string, string> | undefined {
  if (!pairs.length) return undefined;
  const tags: Record<string, string> = {};
  for (const pair of pairs) {
    const colon = typeof pair === 'string' ? pair.indexOf(':') : -1;
    if (colon < 1) throw refuse(`"${String(pair).slice(0, 80)}" must be written key:value, such as tenant:acme.`);
    const key = pair.slice(0, colon);
    if (key in tags) throw refuse(`key "${key.slice(0, 80)}" is given twice: a task has one value per key.`);
    tags[key] = pair.slice(colon + 1);
  }
  return checkTags(tags, refuse);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value;
}
