import { CallbackPayloadTooLargeError, InvalidCallbackPayloadError } from '../domain/errors';

/** What the receiving route reads of a request (Express's, or Node's own). */
export interface CallbackRequest extends AsyncIterable<Buffer | string> {
  headers: Record<string, string | string[] | undefined>;
  /** Set by a body parser of the host that read the body first (Express's json, urlencoded). */
  body?: unknown;
  _body?: boolean;
  /** `NestFactory.create(..., { rawBody: true })`. */
  rawBody?: Buffer;
  readableEnded?: boolean;
}

const JSON_TYPE = /^\s*application\/([\w.+-]*\+)?json\s*(;|$)/i;

/**
 * The body of a POST to a callback url, as text, at most `maxBytes`: read from the request when
 * no parser of the host read it first (a content type its parsers leave alone, `bodyParser:
 * false`), else the raw body the host kept (`rawBody: true`), else the JSON its parser made (its
 * own size limit applied first: Nest's default is 100 kB). A body the host parsed from a form is
 * not JSON (InvalidCallbackPayloadError).
 *
 * @throws CallbackPayloadTooLargeError, InvalidCallbackPayloadError
 */
export async function readCallbackBody(request: CallbackRequest, maxBytes: number): Promise<string> {
  const declared = Number(request.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) throw new CallbackPayloadTooLargeError(declared, maxBytes);
  if (Buffer.isBuffer(request.rawBody)) return within(request.rawBody, maxBytes).toString('utf8');
  if (request._body === true || request.readableEnded) {
    if (!JSON_TYPE.test(String(request.headers['content-type'] ?? ''))) {
      throw new InvalidCallbackPayloadError('send it with Content-Type: application/json.');
    }
    return JSON.stringify(request.body ?? null);
  }
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of request) {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    bytes += buffer.length;
    // Past the limit the rest is read and dropped: the client still gets its 413 on an open connection.
    if (bytes <= maxBytes) chunks.push(buffer);
  }
  if (bytes > maxBytes) throw new CallbackPayloadTooLargeError(bytes, maxBytes);
  return Buffer.concat(chunks).toString('utf8');
}

function within(body: Buffer, maxBytes: number): Buffer {
  if (body.length > maxBytes) throw new CallbackPayloadTooLargeError(body.length, maxBytes);
  return body;
}
