/** Where the engine mounts the dashboard. */
export const DASHBOARD_PATH = '/duraflow';
export const DASHBOARD_LOGIN_PATH = `${DASHBOARD_PATH}/login`;
export const DASHBOARD_LOGOUT_PATH = `${DASHBOARD_PATH}/logout`;

/**
 * The cookie a browser signs in to the dashboard with, since it cannot send the API key as a
 * header: a session id (DashboardSessions), never the key. HttpOnly (no script reads it),
 * SameSite=Strict (no other site's page makes the browser send it), Path=/duraflow (sent to the
 * dashboard only), Secure when the request came over HTTPS (through a proxy named by
 * DURAFLOW_TRUST_PROXY, whose X-Forwarded-Proto is then believed). It opens the dashboard only,
 * never the API.
 */
export const DASHBOARD_SESSION_COOKIE = 'duraflow_session';

/** Whether an HTTP path (no query) is one of the dashboard's. */
export function isDashboardPath(path: string | undefined): boolean {
  return path === DASHBOARD_PATH || (path ?? '').startsWith(`${DASHBOARD_PATH}/`);
}

/** The value of cookie `name` in a `Cookie` header. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  for (const pair of (header ?? '').split(';')) {
    const at = pair.indexOf('=');
    if (at > 0 && pair.slice(0, at).trim() === name) return pair.slice(at + 1).trim();
  }
  return undefined;
}
