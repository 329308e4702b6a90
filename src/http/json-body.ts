import { HttpException, PayloadTooLargeException, UnsupportedMediaTypeException } from '@nestjs/common';
import { NestExpressApplication } from '@nestjs/platform-express';
import { InvalidJsonError } from '../api/request.errors';

/**
 * The largest request body, from the largest input: room for the request's other properties
 * and for an input written with spaces or `\u` escapes, which the library measures compactly.
 * An input over `maxInputBytes` thus reaches the library and gets its INPUT_TOO_LARGE.
 */
export function requestBodyLimit(maxInputBytes: number): number {
  return 2 * maxInputBytes + 64 * 1024;
}

/** What the JSON body parser (body-parser, through Express) passes on when it refuses a body. */
interface BodyParserError {
  type?: string;
  status?: number;
  /** The message is meant for the client. */
  expose?: boolean;
  message?: string;
}

/**
 * JSON bodies up to `limitBytes` (and the dashboard's small form posts); the parser's refusals become the API's typed errors
 * (INVALID_JSON, REQUEST_TOO_LARGE…) instead of Express's, which carry a stack.
 */
export function useJsonBody(app: NestExpressApplication, limitBytes: number): void {
  app.useBodyParser('json', { limit: limitBytes });
  // The dashboard's forms (sign-in, confirmed actions) post small url-encoded bodies.
  app.useBodyParser('urlencoded', { limit: 64 * 1024, extended: false });
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
