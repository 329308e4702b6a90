import { EventKeyRefusedError } from './event-key-refused.error';
import { RegisteredSubscription } from './event-subscription.registry';
import { StoredSubscription } from './event-subscription.store';

/**
 * The key of the debounce or batch an event joins: the payload field's text (as SQL's `->>`
 * reads it: a string as it is, a missing field ''; an object or an array refused), or the
 * workflow's key function when this node registers it. A function key of a workflow this node does not run cannot be computed.
 * @throws EventKeyRefusedError (recorded as the delivery's refusal)
 */
export function groupKeyOf(
  eventName: string,
  stored: StoredSubscription,
  local: RegisteredSubscription | undefined,
  payload: unknown,
): string {
  if (stored.keyInCode) {
    if (!local?.keyOf) {
      throw new EventKeyRefusedError(
        'EVENT_KEY_IN_CODE',
        `Workflow "${stored.workflowName}" computes its ${stored.mode} key in TypeScript, which this node does not register: ` +
          `publish "${eventName}" from a node that runs the workflow, or declare the key as a payload field name.`,
      );
    }
    let key: unknown;
    try {
      key = local.keyOf(payload);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new EventKeyRefusedError(
        'EVENT_KEY_FAILED',
        `The ${stored.mode} key function of workflow "${stored.workflowName}" threw: ${reason}`,
      );
    }
    if (typeof key !== 'string') {
      throw new EventKeyRefusedError(
        'EVENT_KEY_FAILED',
        `The ${stored.mode} key function of workflow "${stored.workflowName}" returned a ${typeof key}, not a string.`,
      );
    }
    return key;
  }
  if (stored.keyField === null) return '';
  const value = payload !== null && typeof payload === 'object' ? (payload as Record<string, unknown>)[stored.keyField] : undefined;
  if (value === undefined || value === null) return '';
  if (typeof value === 'object') {
    // SQL's `->>` and JSON.stringify write an object differently: refused on both paths alike (duraflow_publish).
    throw new EventKeyRefusedError(
      'EVENT_KEY_NOT_SCALAR',
      `The ${stored.mode} key field "${stored.keyField}" of workflow "${stored.workflowName}" holds an ${Array.isArray(value) ? 'array' : 'object'}: ` +
        'a key field must hold a string, a number or a boolean.',
    );
  }
  return typeof value === 'string' ? value : JSON.stringify(value);
}
