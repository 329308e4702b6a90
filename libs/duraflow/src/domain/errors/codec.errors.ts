import { DuraflowError } from './duraflow.error';

/**
 * A stored payload no configured key opens (a key missing from the codec, a wrong key, a value
 * changed in the database, or a ciphertext moved from another task or field). It fails that read
 * alone: a worker fails the task whose input or recorded steps it cannot read, an API returns
 * this error, the dashboard shows the value as "cannot decrypt".
 */
export class PayloadUnreadableError extends DuraflowError {
  readonly code = 'PAYLOAD_UNREADABLE';
  constructor(
    readonly taskId: string,
    readonly field: string,
    readonly reason: string,
  ) {
    super(
      `The ${field} of task ${taskId} cannot be decoded: ${reason}. Configure the key it was written with in ` +
        'the codec (forRoot({ codec: aesGcmCodec({ keys, current }) }); the engine: DURAFLOW_CODEC_KEYS), then read it again.',
    );
  }
}
