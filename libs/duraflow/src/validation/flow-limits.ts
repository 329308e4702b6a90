import { InvalidConcurrencyKeyError, InvalidWorkflowDefinitionError } from '../domain/errors';
import { FlowControlOptions } from '../domain/flow-control';

/** The longest concurrency key (the column is VARCHAR(255)). */
export const MAX_CONCURRENCY_KEY_LENGTH = 255;

/**
 * A workflow's flow control, checked at boot. `null` fields are limits it does not have. A
 * workflow with any limit (or a concurrency key) is "limited": its tasks carry a concurrency key
 * (`''` when it has no key function) and are claimed by the limited claim only.
 */
export interface FlowLimits {
  workflowName: string;
  concurrency: number | null;
  /** The key function, when the workflow has one. */
  concurrencyKey: ((input: unknown) => string) | null;
  keyConcurrency: number | null;
  rateLimit: { limit: number; periodMs: number; perKey: boolean } | null;
}

/** The longest rate-limit window: PostgreSQL intervals are fine with it, and a day is already rare for a rate limit. */
const MAX_PERIOD_MS = 31 * 86_400_000;

/** The flow control a definition declares (null when none), or InvalidWorkflowDefinitionError naming the bad option. */
export function resolveFlowLimits(name: string, source: string, options: FlowControlOptions): FlowLimits | null {
  const { concurrency, concurrencyKey, keyConcurrency, rateLimit } = options;
  if (concurrency === undefined && concurrencyKey === undefined && keyConcurrency === undefined && rateLimit === undefined) return null;
  const bad = (reason: string) => new InvalidWorkflowDefinitionError(name, `${source}: ${reason}`);
  const positive = (value: unknown, what: string, max = 1_000_000): number => {
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1 || value > max) {
      throw bad(`"${what}" must be a whole number from 1 to ${max}, got ${JSON.stringify(value) ?? String(value)}.`);
    }
    return value;
  };
  if (concurrencyKey !== undefined && typeof concurrencyKey !== 'function') {
    throw bad(`"concurrencyKey" must be a function of the input that returns a string, e.g. (input) => input.tenantId.`);
  }
  if (keyConcurrency !== undefined && !concurrencyKey) throw bad(`"keyConcurrency" needs a "concurrencyKey" to count by.`);
  let rate: FlowLimits['rateLimit'] = null;
  if (rateLimit !== undefined) {
    if (typeof rateLimit !== 'object' || rateLimit === null) throw bad(`"rateLimit" must be { limit, periodMs, perKey? }.`);
    if (rateLimit.perKey !== undefined && typeof rateLimit.perKey !== 'boolean') throw bad(`"rateLimit.perKey" must be a boolean.`);
    if (rateLimit.perKey && !concurrencyKey) throw bad(`"rateLimit.perKey" needs a "concurrencyKey" to count by.`);
    rate = {
      limit: positive(rateLimit.limit, 'rateLimit.limit'),
      periodMs: positive(rateLimit.periodMs, 'rateLimit.periodMs', MAX_PERIOD_MS),
      perKey: rateLimit.perKey === true,
    };
  }
  return {
    workflowName: name,
    concurrency: concurrency === undefined ? null : positive(concurrency, 'concurrency'),
    concurrencyKey: concurrencyKey ?? null,
    keyConcurrency: keyConcurrency === undefined ? null : positive(keyConcurrency, 'keyConcurrency'),
    rateLimit: rate,
  };
}

/**
 * What `agent_tasks.concurrency_key` holds for a new task: null for a workflow without flow
 * control, `''` for one without a key function, else the key of the input as stored (the JSON
 * the workflow will see as `ctx.input`).
 *
 * @throws InvalidConcurrencyKeyError when the key function throws or returns a bad key
 */
export function concurrencyKeyOf(limits: FlowLimits | undefined | null, inputJson: string): string | null {
  if (!limits) return null;
  if (!limits.concurrencyKey) return '';
  let key: unknown;
  try {
    key = limits.concurrencyKey(JSON.parse(inputJson));
  } catch (error) {
    throw new InvalidConcurrencyKeyError(limits.workflowName, `threw (${error instanceof Error ? error.message : String(error)})`, error);
  }
  if (typeof key !== 'string') throw new InvalidConcurrencyKeyError(limits.workflowName, `returned ${describe(key)}`);
  if (key.length === 0) throw new InvalidConcurrencyKeyError(limits.workflowName, 'returned an empty string');
  if (key.includes('\u0000')) throw new InvalidConcurrencyKeyError(limits.workflowName, 'returned a string holding a NUL character');
  if (key.length > MAX_CONCURRENCY_KEY_LENGTH) {
    throw new InvalidConcurrencyKeyError(limits.workflowName, `returned a string of ${key.length} characters`);
  }
  return key;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'object') return Array.isArray(value) ? 'an array' : 'an object';
  return `${typeof value} ${String(value)}`;
}
