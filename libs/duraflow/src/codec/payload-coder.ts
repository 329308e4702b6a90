import { Inject, Injectable } from '@nestjs/common';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { PayloadUnreadableError } from '../domain/errors/codec.errors';
import { PayloadCodec, PayloadField } from '../domain/payload-codec';
import { ENCODED_KEY, readableErrorParts } from './readable-error';

/**
 * The one way payloads go into and come out of PostgreSQL: the configured codec, or the value
 * as it is when there is none. Every store that writes or reads a payload column calls this.
 *
 * An error (`field` 'error') keeps its readable parts beside the encoded value (its code, name,
 * step key and attempts: see readable-error.ts), so SQL and the dashboard can still say what
 * failed; its message, stack and details are encoded. A value that is not an encoded one (a
 * row written before the codec was on, or by SQL) reads as it is.
 */
@Injectable()
export class PayloadCoder {
  readonly codec: PayloadCodec | undefined;

  constructor(@Inject(RESOLVED_DURAFLOW_OPTIONS) options: Pick<ResolvedDuraflowOptions, 'codec'>) {
    this.codec = options.codec;
  }

  /** True when payloads are stored encoded (SQL over payload contents cannot read them). */
  get encoding(): boolean {
    return this.codec !== undefined;
  }

  encode(taskId: string, field: PayloadField, value: unknown): unknown {
    if (this.codec === undefined || value === undefined || value === null) return value;
    const encoded = this.codec.encode(value, { taskId, field });
    return field === 'error' ? { ...readableErrorParts(value), [ENCODED_KEY]: encoded } : encoded;
  }

  /** Throws PayloadUnreadableError when no configured key opens the value. */
  decode(taskId: string, field: PayloadField, stored: unknown): unknown {
    if (this.codec === undefined || stored === undefined || stored === null) return stored;
    const inner = field === 'error' ? unwrapError(stored) : stored;
    if (inner === NOT_WRAPPED) return stored;
    try {
      return this.codec.decode(inner, { taskId, field });
    } catch (error) {
      throw new PayloadUnreadableError(taskId, field, error instanceof Error ? error.message : String(error));
    }
  }

  /** `encode` over JSON text (what the stores bind as `$n::jsonb`); null stays null. */
  encodeJson(taskId: string, field: PayloadField, json: string): string;
  encodeJson(taskId: string, field: PayloadField, json: string | null): string | null;
  encodeJson(taskId: string, field: PayloadField, json: string | null | undefined): string | null | undefined;
  encodeJson(taskId: string, field: PayloadField, json: string | null | undefined): string | null | undefined {
    if (this.codec === undefined || json === null || json === undefined) return json;
    return JSON.stringify(this.encode(taskId, field, JSON.parse(json)));
  }

  /**
   * A value decoded, or, when no key opens it, what a view shows instead (`cannot decrypt`)
   * with the error, for the readers that list many rows (the dashboard, the CLI's views).
   */
  tryDecode(taskId: string, field: PayloadField, stored: unknown): { value: unknown; unreadable: PayloadUnreadableError | null } {
    try {
      return { value: this.decode(taskId, field, stored), unreadable: null };
    } catch (error) {
      if (error instanceof PayloadUnreadableError) return { value: CANNOT_DECRYPT, unreadable: error };
      throw error;
    }
  }
}

/** What a view shows for a payload no configured key opens. */
export const CANNOT_DECRYPT = '[cannot decrypt]';

const NOT_WRAPPED = Symbol('not wrapped');

/** The encoded part of a stored error, or NOT_WRAPPED for an error stored as it is (SQL-made, or from before the codec). */
function unwrapError(stored: unknown): unknown {
  if (stored === null || typeof stored !== 'object' || !(ENCODED_KEY in stored)) return NOT_WRAPPED;
  return (stored as Record<string, unknown>)[ENCODED_KEY];
}
