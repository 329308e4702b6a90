import { Inject, Injectable } from '@nestjs/common';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { PayloadCodec, PayloadField } from '../domain/payload-codec';

/**
 * The one way payloads go into and come out of PostgreSQL: the configured codec, or the value
 * as it is when there is none. Every store that writes or reads a payload column calls this.
 */
@Injectable()
export class PayloadCoder {
  readonly codec: PayloadCodec | undefined;

  constructor(@Inject(RESOLVED_DURAFLOW_OPTIONS) options: ResolvedDuraflowOptions) {
    this.codec = options.codec;
  }

  /** True when payloads are stored encoded (SQL over payload contents cannot read them). */
  get encoding(): boolean {
    return this.codec !== undefined;
  }

  encode(taskId: string, field: PayloadField, value: unknown): unknown {
    if (this.codec === undefined || value === undefined || value === null) return value;
    return this.codec.encode(value, { taskId, field });
  }

  decode(taskId: string, field: PayloadField, stored: unknown): unknown {
    if (this.codec === undefined || stored === undefined || stored === null) return stored;
    return this.codec.decode(stored, { taskId, field });
  }
}
