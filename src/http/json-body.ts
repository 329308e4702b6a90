import { ForbiddenException, HttpException, PayloadTooLargeException, UnsupportedMediaTypeException } from '@nestjs/common';
import { NestExpressApplication } from '@nestjs/platform-express';
import { InvalidJsonError } from '../api/request.errors';
import { isDashboardPath } from '../dashboard/dashboard-session';

/**
 * The largest request body, from the largest input: room for the request's other properties
 * and for an input written with spaces or `\u` escapes, which the library measures compactly.
 * An input over `maxInputBytes` thus reaches the library and gets its INPUT_TOO_LARGE.
 */
export function requestBodyLimit(maxInputBytes: number): number {
  return 2 * maxInputBytes + 64 * 1024;
}

interface FormRequest {
  path?: string;
  headers: Record<string, string | undefined>;
}

/** Whether a request carries a body (body-parser's own test, from its headers). */
function hasBody(request: FormRequest): boolean {
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** What the JSON body parser (body-parser, through Express) passes on when it refuses a body. */
interface BodyParserError {
  type?: string;
  status?: number;
  /** The message is meant for the client. */
  expose?: boolean;
  message?: string;
}

/** What a plain HTML form of any site can post without the browser asking first (no CORS preflight). */
const FORM_TYPES = /^\s*(application\/x-www-form-urlencoded|multipart\/form-data|text\/plain)\s*(;|$)/i;

/**
 * What a browser says of a request a page of another site made (Fetch Metadata). A form or a
 * `fetch` without a body and without custom headers goes out cross-site with no CORS preflight;
 * no server-side client sends this header.
 */
const CROSS_SITE = /^\s*(cross-site|same-site)\s*$/i;

/**
 * Requests pages of other sites send are refused on the API (403) whatever their body;
 * JSON bodies up to `limitBytes`, and url-encoded ones on the dashboard's routes only (its forms:
 * sign-in, confirmed actions); the parser's refusals become the API's typed errors (INVALID_JSON,
 * REQUEST_TOO_LARGE…) instead of Express's, which carry a stack. Elsewhere a form's body is
 * refused (415): a form on another site's page could otherwise reach the JSON API, since a
 * browser sends it cross-site without asking.
 */
export function useJsonBody(app: NestExpressApplication, limitBytes: number, callbackPath?: string): void {
  app.use((request: FormRequest, _response: unknown, next: (error?: unknown) => void) => {
    if (isDashboardPath(request.path)) return next();
    // A callback url's route reads its body itself (400 for one that is not JSON); its token is its credential.
    if (callbackPath && (request.path ?? '').startsWith(`${callbackPath}/`)) return next();
    if (CROSS_SITE.test(request.headers['sec-fetch-site'] ?? ''))
      return next(
        new ForbiddenException(
          'This API does not take requests a page of another site sends: call it from a server, or through the dashboard.',
        ),
      );
    const type = request.headers['content-type'];
    if (!FORM_TYPES.test(type ?? '') || !hasBody(request)) return next();
    next(new UnsupportedMediaTypeException(`This API takes JSON bodies: send the body with "Content-Type: application/json".`));
  });
  app.useBodyParser('json', { limit: limitBytes });
  app.useBodyParser('urlencoded', {
    limit: 64 * 1024,
    extended: false,
    type: (request: FormRequest) =>
      isDashboardPath(request.path) && /^\s*application\/x-www-form-urlencoded/i.test(request.headers['content-type'] ?? ''),
  });
  app.use((error: BodyParserError | undefined, _request: unknown, _response: unknown, next: (error?: unknown) => void) => {
    switch (error?.type) {
      case 'entity.parse.failed':
        return next(new InvalidJsonError('The request body', error.message ?? 'it does not parse'));
      case 'entity.too.large':
        return next(
          new PayloadTooLargeException(
            `The request body is over ${limitBytes} bytes. Inputs may be up to DURAFLOW_MAX_INPUT_BYTES as JSON: store large payloads elsewhere and pass a reference.`,
          ),
        );
      case 'charset.unsupported':
      case 'encoding.unsupported':
        return next(new UnsupportedMediaTypeException(`${error.message}. Send the body as UTF-8 JSON.`));
      default:
        // e.g. a request aborted while its body was read.
        if (error?.expose && typeof error.status === 'number' && error.status < 500)
          return next(new HttpException(error.message ?? 'Bad request', error.status));
        return next(error);
    }
  });
}
