import { InvalidDuraflowOptionsError } from '../domain/errors';
import { checkInteger } from './option-checks';

/** Callback urls (`ctx.createCallback`): where they point and how their tokens are signed (`callbacks` option). */
export interface DuraflowCallbackOptions {
  /** The url the outside world reaches this app at, e.g. `https://api.example.com` (http or https, no query). */
  baseUrl: string;
  /** Where the receiving route is mounted (an app's global prefix goes in front: put it in `baseUrl`). Default `/duraflow/callbacks`. */
  path?: string;
  /**
   * The key the urls' tokens are signed with (HMAC-SHA256): at least 32 bytes, the same on every
   * node; changing it makes every open callback's url unknown (404).
   */
  secret: string;
  /** The largest body a POST to a callback url may carry, in bytes (413 beyond). Default 1 MiB. */
  maxBodyBytes?: number;
}

export interface ResolvedCallbackOptions {
  /** Without a trailing slash. */
  baseUrl: string;
  path: string;
  secret: string;
  maxBodyBytes: number;
}

export const DEFAULT_CALLBACK_PATH = '/duraflow/callbacks';
const MIN_SECRET_BYTES = 32;
const PATH_PATTERN = /^(\/[A-Za-z0-9._~-]+)+$/;

/** The `callbacks` option with its defaults, checked; null without it. @throws InvalidDuraflowOptionsError */
export function resolveCallbackOptions(options: DuraflowCallbackOptions | undefined): ResolvedCallbackOptions | null {
  if (options === undefined) return null;
  if (typeof options !== 'object' || options === null) {
    throw new InvalidDuraflowOptionsError('callbacks', 'must be { baseUrl, secret, path?, maxBodyBytes? }.');
  }
  const baseUrl = typeof options.baseUrl === 'string' ? options.baseUrl.replace(/\/+$/, '') : '';
  if (!isHttpUrl(baseUrl)) {
    throw new InvalidDuraflowOptionsError(
      'callbacks.baseUrl',
      `must be an http(s) URL without query or fragment, such as "https://api.example.com", got ${JSON.stringify(options.baseUrl)}.`,
    );
  }
  const path = callbackRoutePath(options.path);
  if (typeof options.secret !== 'string' || Buffer.byteLength(options.secret, 'utf8') < MIN_SECRET_BYTES) {
    throw new InvalidDuraflowOptionsError(
      'callbacks.secret',
      `must be a string of at least ${MIN_SECRET_BYTES} bytes (e.g. \`openssl rand -base64 48\`), the same on every node.`,
    );
  }
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  checkInteger('callbacks.maxBodyBytes', maxBodyBytes, 2);
  return { baseUrl, path, secret: options.secret, maxBodyBytes };
}

/** The route's path (`callbacks.path`), normalized and checked. @throws InvalidDuraflowOptionsError */
export function callbackRoutePath(rawPath: string | undefined): string {
  const raw = rawPath ?? DEFAULT_CALLBACK_PATH;
  const path = typeof raw === 'string' ? `/${raw.replace(/^\/+|\/+$/g, '')}` : '';
  if (!PATH_PATTERN.test(path)) {
    throw new InvalidDuraflowOptionsError(
      'callbacks.path',
      `must be a path of literal segments such as "/duraflow/callbacks", got ${JSON.stringify(raw)}.`,
    );
  }
  return path;
}

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && !url.search && !url.hash && !url.username && !url.password;
  } catch {
    return false;
  }
}
