import { EVENT_NAME_PATTERN, EventGroupKey, OWN_EVENT_NAMES, OWN_EVENT_PREFIX, WorkflowEventOptions } from '../domain/event-options';
import { InvalidEventSubscriptionError } from '../domain/errors';
import { RegisteredSubscription } from './event-subscription.registry';

const MAX_BATCH_SIZE = 10_000;
/** Periods fit PostgreSQL's integer columns and a Node timer. */
const MAX_PERIOD_MS = 2_147_483_647;

/**
 * A workflow's `on`, `debounce` and `batch`, checked at boot.
 * @throws InvalidEventSubscriptionError
 */
export function checkSubscription(
  workflowName: string,
  options: WorkflowEventOptions,
  defaults: { workflowVersion: number | null; maxRetries: number },
): RegisteredSubscription {
  const fail = (reason: string) => new InvalidEventSubscriptionError(workflowName, reason);
  const events = typeof options.on === 'string' ? [options.on] : options.on;
  if (!Array.isArray(events) || !events.length) throw fail('"on" must be an event name or a non-empty array of them');
  for (const event of events) {
    if (typeof event !== 'string' || !EVENT_NAME_PATTERN.test(event)) {
      throw fail(`the event name ${JSON.stringify(event)} must be 1 to 255 characters of [A-Za-z0-9_.:-]`);
    }
    if (event.startsWith(OWN_EVENT_PREFIX) && !OWN_EVENT_NAMES.includes(event)) {
      throw fail(`"${event}" is not one of Duraflow's own events (${OWN_EVENT_NAMES.join(', ')})`);
    }
  }
  if (options.debounce !== undefined && options.batch !== undefined) throw fail('a workflow takes "debounce" or "batch", not both');
  const base = { workflowName, events: [...new Set(events)], ...defaults, periodMs: null, maxWaitMs: null, maxSize: null, timeoutMs: null };
  if (options.debounce !== undefined) {
    const { key, periodMs, maxWaitMs } = options.debounce ?? ({} as never);
    checkMs(fail, 'debounce.periodMs', periodMs);
    if (maxWaitMs !== undefined) checkMs(fail, 'debounce.maxWaitMs', maxWaitMs, periodMs);
    return { ...base, mode: 'debounce', ...checkKey(fail, 'debounce.key', key, true), periodMs, maxWaitMs: maxWaitMs ?? null };
  }
  if (options.batch !== undefined) {
    const { key, maxSize, timeoutMs } = options.batch ?? ({} as never);
    if (!Number.isInteger(maxSize) || maxSize < 1 || maxSize > MAX_BATCH_SIZE)
      throw fail(`batch.maxSize must be an integer from 1 to ${MAX_BATCH_SIZE}`);
    checkMs(fail, 'batch.timeoutMs', timeoutMs);
    return { ...base, mode: 'batch', ...checkKey(fail, 'batch.key', key, false), maxSize, timeoutMs };
  }
  return { ...base, mode: 'each', keyField: null };
}

function checkMs(fail: (reason: string) => Error, what: string, value: unknown, min = 1): void {
  if (!Number.isInteger(value) || (value as number) < min || (value as number) > MAX_PERIOD_MS) {
    throw fail(`${what} must be an integer number of milliseconds from ${min} to ${MAX_PERIOD_MS}`);
  }
}

function checkKey(
  fail: (reason: string) => Error,
  what: string,
  key: EventGroupKey | undefined,
  required: boolean,
): Pick<RegisteredSubscription, 'keyOf' | 'keyField'> {
  if (key === undefined && !required) return { keyField: null };
  if (typeof key === 'function') return { keyOf: key, keyField: null };
  if (typeof key === 'string' && key.length >= 1 && key.length <= 255) return { keyField: key };
  throw fail(`${what} must be a function of the payload returning a string, or the name of a payload field`);
}
