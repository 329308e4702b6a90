import { Injectable, Optional } from '@nestjs/common';
import { CANNOT_DECRYPT, PayloadCoder } from '../codec/payload-coder';
import { InvalidCursorError } from '../domain/errors';
import { DuraflowDatabase } from './duraflow-database';

/** A signal as `listSignals` / `getSignal` / `getSignals` return it. */
export interface TaskSignal {
  id: string;
  name: string;
  /** The payload; null when there is none, or when it is left out (`payloadOmitted`). */
  payload: unknown;
  createdAt: Date;
  /** When a wait took it; null while it is kept for a wait to come. */
  consumedAt: Date | null;
  /** The key of the wait that took it. */
  consumedByStep: string | null;
  /** The payload's size as JSON text in the database, in bytes (0 without a payload). */
  payloadBytes: number;
  /** The payload is larger than the read's `maxPayloadBytes`: it is left out (`getSignal` reads it whole). */
  payloadOmitted: boolean;
  /** The payload's first 200 characters as JSON text, cut in the database; null without a payload. */
  payloadPreview: string | null;
}

/** One page of a task's signals as the store read it, and whether more follow it. */
export interface StoredSignalPage {
  signals: TaskSignal[];
  more: boolean;
}

/** What a page of signals is cut to: after the signal `afterId`, at most `limit` rows and `maxBytes` bytes. */
export interface SignalPageBounds {
  afterId: string;
  limit: number;
  /** A payload larger than this is left out of the page (0: every payload left out, previews only). */
  maxPayloadBytes: number;
  maxBytes: number;
}

/** The preview of a payload a codec encoded and the read left out (its text is never cut in SQL). */
export const ENCRYPTED_PREVIEW = '[encrypted]';

/** Characters of a payload's JSON text every read carries as its preview. */
export const SIGNAL_PREVIEW_CHARS = 200;

/** SQL: a `maxPayloadBytes` no payload is over (a read of whole payloads). */
const WHOLE = '9223372036854775807::bigint';

/** The opaque `nextCursor` of a page of signals: the id of its last signal. */
export function encodeSignalCursor(signalId: string): string {
  return Buffer.from(`signal:${signalId}`, 'utf8').toString('base64url');
}

/** @throws InvalidCursorError for anything `encodeSignalCursor` did not make. */
export function decodeSignalCursor(cursor: string): string {
  const match = /^signal:(\d{1,18})$/.exec(Buffer.from(String(cursor), 'base64url').toString('utf8'));
  if (!match) throw new InvalidCursorError();
  return match[1];
}

/** SQL, with `s` a task_signals row and `payloadBytes` its payload's size: the columns a TaskSignal is read from. */
function signalColumns(payloadBytes: string, maxPayloadBytes: string): string {
  return `s.id, s.name, s.created_at, s.consumed_at, s.consumed_by_step,
          CASE WHEN ${payloadBytes} <= ${maxPayloadBytes} THEN s.payload END AS payload,
          ${payloadBytes} AS payload_bytes, ${payloadBytes} > ${maxPayloadBytes} AS payload_omitted,
          left(s.payload::text, ${SIGNAL_PREVIEW_CHARS}) AS payload_preview`;
}

function toTaskSignal(row: Record<string, any>): TaskSignal {
  return {
    id: String(row.id),
    name: row.name,
    payload: row.payload ?? null,
    createdAt: row.created_at,
    consumedAt: row.consumed_at,
    consumedByStep: row.consumed_by_step,
    payloadBytes: Number(row.payload_bytes),
    payloadOmitted: row.payload_omitted === true,
    payloadPreview: row.payload_preview ?? null,
  };
}

/** The reads of `task_signals` (a signal is kept and taken by moves of the lifecycle: lifecycle/send-signal.ts, settle-wait.ts). */
@Injectable()
export class SignalStore {
  constructor(
    private readonly db: DuraflowDatabase,
    @Optional() private readonly coder?: PayloadCoder,
  ) {}

  /**
   * With a codec, a signal's payload decoded and its preview cut from the decoded JSON (SQL sees
   * only ciphertext): `[encrypted]` when the payload was left out of the read, `[cannot decrypt]`
   * in a page when no key opens it (`strict`, a read of one signal: PayloadUnreadableError).
   */
  private decoded(taskId: string, signal: TaskSignal, strict: boolean): TaskSignal {
    if (!this.coder?.encoding || signal.payloadBytes === 0) return signal;
    if (signal.payloadOmitted) return { ...signal, payloadPreview: ENCRYPTED_PREVIEW };
    const { value, unreadable } = strict
      ? { value: this.coder.decode(taskId, 'signal', signal.payload), unreadable: null }
      : this.coder.tryDecode(taskId, 'signal', signal.payload);
    if (unreadable) return { ...signal, payload: null, payloadPreview: CANNOT_DECRYPT };
    const text = JSON.stringify(value) ?? 'null';
    return { ...signal, payload: value, payloadPreview: text.slice(0, SIGNAL_PREVIEW_CHARS) };
  }

  /**
   * One page of the task's signals in the order they were sent (id order, on idx_task_signals_task).
   * Sizes are measured and payloads cut in the database, on the page's rows only: a payload over
   * `maxPayloadBytes` never reaches this process, and the page stops before `maxBytes` of rows
   * (each row counted with its name, preview and the payload it carries), though it always holds
   * its first row.
   */
  async listSignalPage(taskId: string, bounds: SignalPageBounds): Promise<StoredSignalPage> {
    const { rows } = await this.db.query(
      `WITH page AS (
         SELECT s.id, COALESCE(octet_length(s.payload::text), 0) AS payload_bytes,
                octet_length(s.name) + COALESCE(octet_length(s.consumed_by_step), 0) + 4 * ${SIGNAL_PREVIEW_CHARS} + 100 AS row_bytes
         FROM task_signals s
         WHERE s.task_id = $1 AND s.id > $2::bigint
         ORDER BY s.id LIMIT $3 + 1
       ), sized AS (
         SELECT id, payload_bytes, row_number() OVER w AS n,
                sum(row_bytes + CASE WHEN payload_bytes <= $4::bigint THEN payload_bytes ELSE 0 END) OVER w AS bytes_through
         FROM page WINDOW w AS (ORDER BY id)
       ), kept AS (
         SELECT id, n, payload_bytes FROM sized WHERE n <= $3 AND (n = 1 OR bytes_through <= $5::bigint)
       )
       SELECT ${signalColumns('kept.payload_bytes', '$4::bigint')},
              (SELECT count(*) FROM page) > (SELECT count(*) FROM kept) AS more
       FROM task_signals s JOIN kept USING (id)
       ORDER BY kept.n`,
      [taskId, bounds.afterId, bounds.limit, bounds.maxPayloadBytes, bounds.maxBytes],
    );
    return {
      signals: rows.map((row) => this.decoded(taskId, toTaskSignal(row), false)),
      more: rows.length > 0 && rows[0].more === true,
    };
  }

  /** One signal of the task with its whole payload; null when the task has no signal of this id. */
  async findSignal(taskId: string, signalId: string): Promise<TaskSignal | null> {
    const { rows } = await this.db.query(
      `SELECT ${signalColumns('COALESCE(octet_length(s.payload::text), 0)', WHOLE)}
       FROM task_signals s WHERE s.task_id = $1 AND s.id = $2::bigint`,
      [taskId, signalId],
    );
    return rows.length ? this.decoded(taskId, toTaskSignal(rows[0]), true) : null;
  }
}
