import { InvalidDuraflowOptionsError } from '../domain/errors';
import { checkInteger } from './option-checks';

/** Events that start workflows (`events` option, docs/events.md). */
export interface DuraflowEventOptions {
  /** How often a node with a debounced or batched workflow looks for groups due (ms). Default 250. */
  groupPollIntervalMs?: number;
  /** Published events (and their deliveries) older than this are deleted by the worker nodes, every 15 minutes (ms). Default 7 days. */
  retentionMs?: number;
}

export type ResolvedEventOptions = Required<DuraflowEventOptions>;

export const DEFAULT_EVENT_OPTIONS: ResolvedEventOptions = Object.freeze({
  groupPollIntervalMs: 250,
  retentionMs: 7 * 24 * 3_600_000,
});

/** The `events` option with its defaults, checked. @throws InvalidDuraflowOptionsError */
export function resolveEventOptions(options: DuraflowEventOptions | undefined): ResolvedEventOptions {
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw new InvalidDuraflowOptionsError('events', 'must be { groupPollIntervalMs?, retentionMs? }.');
  }
  const resolved = { ...DEFAULT_EVENT_OPTIONS };
  for (const key of Object.keys(resolved) as Array<keyof ResolvedEventOptions>) {
    const value = options?.[key];
    if (value !== undefined) resolved[key] = value;
    checkInteger(`events.${key}`, resolved[key], 1);
  }
  return resolved;
}
