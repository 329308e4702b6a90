import { createCipheriv, createDecipheriv, createSecretKey, KeyObject, randomBytes } from 'node:crypto';
import { InvalidDuraflowOptionsError } from '../domain/errors';
import { PayloadCodec, PayloadContext } from '../domain/payload-codec';

/** The algorithm an encoded value names in its `$enc` key. */
export const AES_GCM = 'aes-256-gcm';

/** A value as `aesGcmCodec` stores it: JSON, recognisable by its `$enc` key. */
export interface AesGcmEnvelope {
  /** The algorithm: `aes-256-gcm`. */
  $enc: typeof AES_GCM;
  /** The id of the key that sealed it. */
  k: string;
  /** The 12-byte IV, base64. */
  iv: string;
  /** The 16-byte authentication tag, base64. */
  t: string;
  /** The ciphertext of the value's JSON text, base64. */
  d: string;
}

export interface AesGcmCodecOptions {
  /** Key id → a 32-byte key (a Buffer, or its base64). Every key that sealed a stored value must stay here until `duraflow reencrypt` has rewritten it. */
  keys: Record<string, Buffer | Uint8Array | string>;
  /** The id of the key new values are sealed with (one of `keys`). */
  current: string;
}

/** The AES-GCM codec, with the ids of its keys (what `duraflow reencrypt` compares). */
export interface AesGcmCodec extends PayloadCodec {
  readonly currentKeyId: string;
  readonly keyIds: readonly string[];
  /** The id of the key a stored value was sealed with; null for a value this codec did not seal (plaintext). */
  keyIdOf(stored: unknown): string | null;
}

const KEY_ID = /^[A-Za-z0-9_.-]{1,64}$/;

/** True for a value as an AES-GCM codec stores it (whatever its key). */
export function isAesGcmEnvelope(value: unknown): value is AesGcmEnvelope {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const envelope = value as Record<string, unknown>;
  return envelope.$enc === AES_GCM && typeof envelope.k === 'string' && typeof envelope.iv === 'string' && typeof envelope.d === 'string';
}

function keyBytes(id: string, key: Buffer | Uint8Array | string): Buffer {
  if (!KEY_ID.test(id)) {
    throw new InvalidDuraflowOptionsError('codec.keys', `key id "${id}" must be 1-64 letters, digits, "_", "." or "-".`);
  }
  const bytes = typeof key === 'string' ? Buffer.from(key, 'base64') : Buffer.from(key);
  if (bytes.length !== 32 || (typeof key === 'string' && bytes.toString('base64') !== key.replace(/\s/g, ''))) {
    throw new InvalidDuraflowOptionsError(
      `codec.keys.${id}`,
      `must be 32 bytes (AES-256), as a Buffer or in base64 (make one with: openssl rand -base64 32); got ${bytes.length} bytes.`,
    );
  }
  return bytes;
}

/** The associated data: the task id and the field, so a ciphertext opens only where it was written. */
function associatedData(context: PayloadContext): Buffer {
  return Buffer.from(`duraflow:${context.taskId}:${context.field}`, 'utf8');
}

/**
 * Encryption at rest with node:crypto AES-256-GCM: each value sealed under the current key with
 * a random 12-byte IV, its key id kept beside it, its task id and field bound as associated data
 * (a ciphertext copied to another row or field does not open). A value that is not an envelope
 * (a row written before the codec was on, or by SQL) is read as it is. Throws
 * InvalidDuraflowOptionsError for a key that is not 32 bytes or a `current` that is not a key.
 */
export function aesGcmCodec(options: AesGcmCodecOptions): AesGcmCodec {
  if (!options || typeof options !== 'object' || !options.keys || typeof options.keys !== 'object') {
    throw new InvalidDuraflowOptionsError('codec', 'aesGcmCodec needs { keys: { id: key32 }, current: id }.');
  }
  // KeyObjects made once: a Buffer key is imported again by every createCipheriv (a fifth of a seal's time).
  const keys = new Map<string, KeyObject>(Object.entries(options.keys).map(([id, key]) => [id, createSecretKey(keyBytes(id, key))]));
  if (!keys.has(options.current)) {
    throw new InvalidDuraflowOptionsError(
      'codec.current',
      `must be the id of one of the keys (${[...keys.keys()].join(', ') || 'none given'}), got "${String(options.current)}".`,
    );
  }
  const current = options.current;
  const currentKey = keys.get(current)!;
  return {
    name: AES_GCM,
    currentKeyId: current,
    keyIds: [...keys.keys()],
    keyIdOf: (stored) => (isAesGcmEnvelope(stored) ? stored.k : null),
    encode(value: unknown, context: PayloadContext): AesGcmEnvelope {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', currentKey, iv);
      cipher.setAAD(associatedData(context));
      const data = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
      return {
        $enc: AES_GCM,
        k: current,
        iv: iv.toString('base64'),
        t: cipher.getAuthTag().toString('base64'),
        d: data.toString('base64'),
      };
    },
    decode(stored: unknown, context: PayloadContext): unknown {
      if (!isAesGcmEnvelope(stored)) return stored;
      const key = keys.get(stored.k);
      if (!key) throw new Error(`no key "${stored.k}" is configured (keys: ${[...keys.keys()].join(', ')})`);
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(stored.iv, 'base64'));
      decipher.setAAD(associatedData(context));
      decipher.setAuthTag(Buffer.from(stored.t, 'base64'));
      let text: string;
      try {
        text = Buffer.concat([decipher.update(Buffer.from(stored.d, 'base64')), decipher.final()]).toString('utf8');
      } catch {
        throw new Error(`key "${stored.k}" does not open it (a wrong key, a changed value, or a value moved from another task or field)`);
      }
      return JSON.parse(text);
    },
  };
}
