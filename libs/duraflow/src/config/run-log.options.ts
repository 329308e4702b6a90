import { InvalidDuraflowOptionsError } from '../domain/errors';
import { checkInteger } from './option-checks';

/** What a run keeps of its `ctx.log` lines (`logs` option). */
export interface DuraflowRunLogOptions {
  /**
   * Lines kept per task, across its runs: past it the oldest are kept and one more row (level
   * `warn`, `metadata.dropped`) counts those dropped. Default 1000.
   */
  maxPerTask?: number;
  /** A longer message is cut to this many characters (ending with `…`). Default 4000. */
  maxMessageChars?: number;
  /** Metadata larger than this, as JSON bytes, is kept as `{ truncated: true, bytes }`. Default 8192. */
  maxMetadataBytes?: number;
}

export type ResolvedRunLogOptions = Required<DuraflowRunLogOptions>;

export const DEFAULT_RUN_LOG_OPTIONS: ResolvedRunLogOptions = Object.freeze({
  maxPerTask: 1000,
  maxMessageChars: 4000,
  maxMetadataBytes: 8192,
});

/** The `logs` option with its defaults, checked. @throws InvalidDuraflowOptionsError */
export function resolveRunLogOptions(options: DuraflowRunLogOptions | undefined): ResolvedRunLogOptions {
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw new InvalidDuraflowOptionsError('logs', 'must be { maxPerTask?, maxMessageChars?, maxMetadataBytes? }.');
  }
  const resolved = { ...DEFAULT_RUN_LOG_OPTIONS };
  for (const key of Object.keys(resolved) as Array<keyof ResolvedRunLogOptions>) {
    const value = options?.[key];
    if (value !== undefined) resolved[key] = value;
    checkInteger(`logs.${key}`, resolved[key], 1);
  }
  return resolved;
}
