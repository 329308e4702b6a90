import { InvalidDuraflowOptionsError } from '../domain/errors';
import { AesGcmCodec, aesGcmCodec } from './aes-gcm-codec';

/**
 * The AES-GCM codec the environment describes, for the engine and the `duraflow` command:
 * `DURAFLOW_CODEC_KEYS=k2:<base64>,k1:<base64>` (every key that sealed a stored value) and
 * `DURAFLOW_CODEC_CURRENT=k2` (the key new values are sealed with; may be left out when there is
 * one key). Undefined when DURAFLOW_CODEC_KEYS is unset or empty: payloads are plain JSON.
 *
 * @throws InvalidDuraflowOptionsError for a malformed list, a key that is not 32 bytes, or an unknown current key
 */
export function codecFromEnv(env: NodeJS.ProcessEnv): AesGcmCodec | undefined {
  const list = (env.DURAFLOW_CODEC_KEYS ?? '').trim();
  if (!list) {
    if (env.DURAFLOW_CODEC_CURRENT?.trim()) {
      throw new InvalidDuraflowOptionsError(
        'DURAFLOW_CODEC_CURRENT',
        'is set but DURAFLOW_CODEC_KEYS is not: give the keys as id:base64,id:base64.',
      );
    }
    return undefined;
  }
  const keys: Record<string, string> = {};
  for (const entry of list.split(',')) {
    const separator = entry.indexOf(':');
    const id = entry.slice(0, separator).trim();
    if (separator < 1 || id in keys) {
      throw new InvalidDuraflowOptionsError(
        'DURAFLOW_CODEC_KEYS',
        `must be id:base64 pairs separated by commas, each id once (e.g. k2:<32 bytes in base64>,k1:<...>); an entry is "${entry.slice(0, Math.max(separator, 0)) || '(no id)'}:…".`,
      );
    }
    keys[id] = entry.slice(separator + 1).trim();
  }
  const ids = Object.keys(keys);
  const current = env.DURAFLOW_CODEC_CURRENT?.trim() || (ids.length === 1 ? ids[0] : '');
  if (!current) {
    throw new InvalidDuraflowOptionsError(
      'DURAFLOW_CODEC_CURRENT',
      `must name the key new payloads are sealed with (one of ${ids.join(', ')}).`,
    );
  }
  return aesGcmCodec({ keys, current });
}
