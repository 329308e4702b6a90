import { createHmac } from 'node:crypto';
import { RunningEngine } from '../src/engine';
import { startTestEngine } from './fixtures/engine/engine-app';
import { useTestBed } from './support/test-bed';
import { sleep } from './support/waiting';

/**
 * Issue 35.6: the engine dashboard's sign-in. A session is a random id the engine keeps, with an
 * idle and an absolute lifetime, ended on the server at sign-out; wrong keys are throttled per
 * client address; the cookie is Secure when the request came over HTTPS through a trusted proxy.
 */

const KEY = 'session-key-9';
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

const bed = useTestBed();

async function call(engine: RunningEngine, path: string, init: RequestInit = {}) {
  const response = await fetch(`${engine.httpUrl}${path}`, { redirect: 'manual', ...init });
  return { status: response.status, text: await response.text(), headers: response.headers };
}

async function signIn(engine: RunningEngine, headers: Record<string, string> = {}) {
  const answer = await call(engine, '/duraflow/login', { method: 'POST', headers: { ...FORM, ...headers }, body: `apiKey=${KEY}` });
  expect(answer.status).toBe(303);
  return { cookie: answer.headers.get('set-cookie')!.split(';')[0], setCookie: answer.headers.get('set-cookie')! };
}

const dashboard = async (engine: RunningEngine, cookie: string) => (await call(engine, '/duraflow', { headers: { cookie } })).status;

describe('sessions', () => {
  it('are random ids: every sign-in gets its own, and a cookie computed from the key opens nothing', async () => {
    const engine = await startTestEngine(bed, { DURAFLOW_API_KEY: KEY });
    const first = await signIn(engine);
    const second = await signIn(engine);
    expect(first.cookie).not.toBe(second.cookie);
    expect(first.cookie).toMatch(/^duraflow_session=[A-Za-z0-9_-]{43}$/);
    expect(await dashboard(engine, first.cookie)).toBe(200);
    expect(await dashboard(engine, second.cookie)).toBe(200);
    // The cookie every earlier engine set: HMAC(key, constant), computable offline.
    const computed = createHmac('sha256', KEY).update('duraflow-dashboard-session').digest('base64url');
    expect(await dashboard(engine, `duraflow_session=${computed}`)).toBe(401);
  });

  it('end on the server at sign-out: a copy of the cookie kept elsewhere no longer works', async () => {
    const engine = await startTestEngine(bed, { DURAFLOW_API_KEY: KEY });
    const { cookie } = await signIn(engine);
    const other = await signIn(engine);
    expect((await call(engine, '/duraflow/logout', { method: 'POST', headers: { cookie } })).status).toBe(303);
    expect(await dashboard(engine, cookie)).toBe(401);
    expect((await call(engine, '/duraflow/login', { headers: { cookie } })).text).not.toContain('You are signed in.');
    expect(await dashboard(engine, other.cookie)).toBe(200); // only that session ended
  });

  it('end when unused for DURAFLOW_DASHBOARD_SESSION_IDLE', async () => {
    const engine = await startTestEngine(bed, { DURAFLOW_API_KEY: KEY, DURAFLOW_DASHBOARD_SESSION_IDLE: '1s' });
    const { cookie } = await signIn(engine);
    await sleep(1_500);
    expect(await dashboard(engine, cookie)).toBe(401);
  });

  it('end DURAFLOW_DASHBOARD_SESSION_MAX after the sign-in, however much they are used', async () => {
    const engine = await startTestEngine(bed, { DURAFLOW_API_KEY: KEY, DURAFLOW_DASHBOARD_SESSION_MAX: '3s' });
    const { cookie, setCookie } = await signIn(engine);
    expect(setCookie).toContain('Max-Age=3;');
    await sleep(1_000);
    expect(await dashboard(engine, cookie)).toBe(200);
    await sleep(2_500);
    expect(await dashboard(engine, cookie)).toBe(401);
  });
});

describe('sign-in', () => {
  it('answers 429 with Retry-After after five wrong keys from one address, even to the right key, and counts each address apart', async () => {
    const engine = await startTestEngine(bed, { DURAFLOW_API_KEY: KEY, DURAFLOW_TRUST_PROXY: 'loopback' });
    const attempt = (key: string, client: string) =>
      call(engine, '/duraflow/login', { method: 'POST', headers: { ...FORM, 'x-forwarded-for': client }, body: `apiKey=${key}` });
    for (let i = 1; i <= 5; i++) expect([i, (await attempt(`guess-${i}`, '203.0.113.7')).status]).toEqual([i, 401]);
    const throttled = await attempt('guess-6', '203.0.113.7');
    expect(throttled.status).toBe(429);
    expect(Number(throttled.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(throttled.text).toContain('Too many wrong keys');
    const right = await attempt(KEY, '203.0.113.7');
    expect(right.status).toBe(429);
    expect(right.headers.get('set-cookie')).toBeNull();
    // Another client is not held back by the first one's guesses.
    expect((await attempt(KEY, '203.0.113.8')).status).toBe(303);
  });
});

describe('the cookie', () => {
  it('is Secure when a trusted proxy says the request came over HTTPS, and always HttpOnly and SameSite=Strict', async () => {
    const trusting = await startTestEngine(bed, { DURAFLOW_API_KEY: KEY, DURAFLOW_TRUST_PROXY: 'loopback' });
    const overHttps = await signIn(trusting, { 'x-forwarded-proto': 'https' });
    expect(overHttps.setCookie).toMatch(/; HttpOnly; Secure; SameSite=Strict$/);
    expect((await signIn(trusting)).setCookie).not.toContain('Secure');
    const out = await call(trusting, '/duraflow/logout', {
      method: 'POST',
      headers: { cookie: overHttps.cookie, 'x-forwarded-proto': 'https' },
    });
    expect(out.headers.get('set-cookie')).toMatch(/; HttpOnly; Secure; SameSite=Strict$/);

    // Without DURAFLOW_TRUST_PROXY nobody's X-Forwarded-Proto is believed.
    const direct = await startTestEngine(bed, { DURAFLOW_API_KEY: KEY });
    expect((await signIn(direct, { 'x-forwarded-proto': 'https' })).setCookie).not.toContain('Secure');
  });
});
