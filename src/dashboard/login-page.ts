import { createHash } from 'node:crypto';
import { DASHBOARD_LOGIN_PATH, DASHBOARD_LOGOUT_PATH, DASHBOARD_PATH } from './dashboard-session';

const STYLE = `
body { margin: 0; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background: #f7f7f5; color: #1d2125; }
header { padding: .6rem 1.25rem; background: #14243b; color: #fff; font-weight: 700; }
main { max-width: 28rem; margin: 3rem auto; padding: 1.25rem; background: #fff; border: 1px solid #d9dcdf; border-radius: 6px; }
h1 { font-size: 1.3rem; margin-top: 0; }
label { display: block; margin: 1rem 0 .3rem; }
input { width: 100%; box-sizing: border-box; font: inherit; padding: .4rem .5rem; border: 1px solid #b8bec4; border-radius: 4px; }
button { margin-top: 1rem; font: inherit; padding: .4rem 1rem; border-radius: 4px; border: 1px solid #1f5fbf; background: #1f5fbf; color: #fff; cursor: pointer; }
button.secondary { background: transparent; color: #1f5fbf; }
.error { color: #b3261e; }
a { color: #1f5fbf; }
:focus-visible { outline: 3px solid #ffbf47; outline-offset: 2px; }
`;

/** The page's headers: only its own inline stylesheet, forms to this origin, never framed, never cached. */
export const LOGIN_PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Type': 'text/html; charset=utf-8',
  'Content-Security-Policy': `default-src 'none'; style-src 'sha256-${createHash('sha256').update(STYLE).digest('base64')}'; img-src data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  'Cache-Control': 'no-store',
};

export type LoginState = 'form' | 'wrong-key' | 'throttled' | 'signed-in' | 'no-key';

const MESSAGES: Record<LoginState, string> = {
  form: '',
  'wrong-key': '<p class="error" role="alert">That is not the engine\'s API key. Try again.</p>',
  throttled:
    '<p class="error" role="alert">Too many wrong keys were sent from your address. Wait a little (the longer, the more wrong keys) and try again.</p>',
  'signed-in': '<p role="status">You are signed in.</p>',
  'no-key': '<p role="status">This engine has no API key (DURAFLOW_API_KEY is unset): the dashboard is open to anyone who reaches it.</p>',
};

/** The sign-in page of the engine's dashboard. It holds no value from the request, so nothing in it needs escaping. */
export function loginPage(state: LoginState): string {
  const form =
    state === 'no-key'
      ? ''
      : `<form method="post" action="${DASHBOARD_LOGIN_PATH}">
  <label for="api-key">API key</label>
  <input id="api-key" name="apiKey" type="password" autocomplete="current-password" required autofocus>
  <button type="submit">Sign in</button>
</form>`;
  const signOut =
    state === 'signed-in'
      ? `<form method="post" action="${DASHBOARD_LOGOUT_PATH}"><button type="submit" class="secondary">Sign out</button></form>`
      : '';
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">
<title>Sign in · Duraflow</title><style>${STYLE}</style></head>
<body>
<header>Duraflow</header>
<main>
<h1>Sign in to the dashboard</h1>
${MESSAGES[state]}
${form}
${signOut}
<p><a href="${DASHBOARD_PATH}">Go to the dashboard</a></p>
</main>
</body>
</html>
`;
}
