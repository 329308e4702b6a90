import { InvalidDuraflowOptionsError } from '../domain/errors';
import { checkInteger } from './option-checks';

/** The bounds of what a run writes with `ctx.writeStream` (`streams` option). */
export interface DuraflowStreamOptions {
  /** A chunk larger than this, as JSON bytes, is refused (StreamLimitError). Default 65,536. */
  maxChunkBytes?: number;
  /** Chunks a task keeps across all its streams and runs; one more is refused (StreamLimitError). Default 10,000. */
  maxChunksPerTask?: number;
}

export type ResolvedStreamOptions = Required<DuraflowStreamOptions>;

export const DEFAULT_STREAM_OPTIONS: ResolvedStreamOptions = Object.freeze({
  maxChunkBytes: 65_536,
  maxChunksPerTask: 10_000,
});

/** The `streams` option with its defaults, checked. @throws InvalidDuraflowOptionsError */
export function resolveStreamOptions(options: DuraflowStreamOptions | undefined): ResolvedStreamOptions {
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw new InvalidDuraflowOptionsError('streams', 'must be { maxChunkBytes?, maxChunksPerTask? }.');
  }
  const resolved = { ...DEFAULT_STREAM_OPTIONS };
  for (const key of Object.keys(resolved) as Array<keyof ResolvedStreamOptions>) {
    const value = options?.[key];
    if (value !== undefined) resolved[key] = value;
    checkInteger(`streams.${key}`, resolved[key], 1);
  }
  return resolved;
}
