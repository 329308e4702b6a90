/**
 * Encryption at rest (or any other transformation) of the payloads Duraflow stores: every
 * value a user hands to Duraflow or a run returns goes through the configured codec on its
 * way into PostgreSQL and back. What the codec returns must be JSON (it is stored in jsonb).
 */

/** Which payload of a task a value is: the codec binds a ciphertext to its task and field. */
export type PayloadField = 'input' | 'output' | 'error' | 'step_output' | 'signal' | 'event' | 'stream' | 'callback' | 'publish' | 'log';

export interface PayloadContext {
  /** The task the payload belongs to (for a published event: the event's id). */
  readonly taskId: string;
  readonly field: PayloadField;
}

/**
 * Turns a payload into what is stored and back. Both calls are synchronous (they sit on the
 * hot path of every checkpoint): load keys at boot, not per call. `decode` throws when it
 * cannot open a value; Duraflow turns that into PayloadUnreadableError for that read alone.
 */
export interface PayloadCodec {
  /** A short name for logs and the CLI (`aes-256-gcm`). */
  readonly name: string;
  encode(value: unknown, context: PayloadContext): unknown;
  decode(stored: unknown, context: PayloadContext): unknown;
}
