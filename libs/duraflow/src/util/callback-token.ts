import { createHmac, timingSafeEqual } from 'node:crypto';

/** What a callback url's token names: the task, the callback (its id and key) and when it expires. */
export interface CallbackClaims {
  taskId: string;
  callbackId: string;
  key: string;
  /** Milliseconds since the epoch; null: never. */
  expiresAt: number | null;
}

/**
 * The token of a callback url: `<claims>.<signature>`, the claims as base64url JSON and the
 * signature their HMAC-SHA256 under the deployment's secret, base64url. Whoever holds the url
 * may complete the callback (it is the credential); nobody without the secret can make one.
 */
export function signCallbackToken(secret: string, claims: CallbackClaims): string {
  const body = Buffer.from(JSON.stringify({ t: claims.taskId, c: claims.callbackId, k: claims.key, e: claims.expiresAt }), 'utf8');
  const encoded = body.toString('base64url');
  return `${encoded}.${signature(secret, encoded).toString('base64url')}`;
}

/** The claims of a token this secret signed; null for anything else (forged, altered, cut, not a token). */
export function verifyCallbackToken(secret: string, token: string): CallbackClaims | null {
  const match = /^([A-Za-z0-9_-]{1,4096})\.([A-Za-z0-9_-]{43})$/.exec(token);
  if (!match) return null;
  const expected = signature(secret, match[1]);
  const given = Buffer.from(match[2], 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
  try {
    const claims = JSON.parse(Buffer.from(match[1], 'base64url').toString('utf8')) as Record<string, unknown>;
    const { t, c, k, e } = claims;
    if (typeof t !== 'string' || typeof c !== 'string' || typeof k !== 'string') return null;
    if (e !== null && typeof e !== 'number') return null;
    return { taskId: t, callbackId: c, key: k, expiresAt: e };
  } catch {
    return null;
  }
}

function signature(secret: string, encodedClaims: string): Buffer {
  return createHmac('sha256', secret).update(`duraflow-callback.${encodedClaims}`).digest();
}

/** Where a callback url points and how its token is signed (the resolved `callbacks` option). */
export interface CallbackUrlSettings {
  baseUrl: string;
  path: string;
  secret: string;
}

/** `<baseUrl><path>/<token>`: the same claims always make the same url (a replay's, the dashboard's). */
export function callbackUrl(settings: CallbackUrlSettings, claims: CallbackClaims): string {
  return `${settings.baseUrl}${settings.path}/${signCallbackToken(settings.secret, claims)}`;
}
