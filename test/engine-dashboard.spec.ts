import { useTestBed } from './support/test-bed';
import { startTestEngine } from './fixtures/engine/engine-app';
import { RunningEngine } from '../src/engine';

/** The engine's dashboard at /duraflow and its sign-in for browsers (in Chromium: dashboard-browser.spec.ts). */

const KEY = 'engine-key-7';
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

const bed = useTestBed();

async function call(
  engine: RunningEngine,
  path: string,
  init: RequestInit = {},
): Promise<{ status: number; text: string; headers: Headers }> {
  const response = await fetch(`${engine.httpUrl}${path}`, { redirect: 'manual', ...init });
  return { status: response.status, text: await response.text(), headers: response.headers };
}

describe('with DURAFLOW_API_KEY', () => {
  let engine: RunningEngine;

  beforeAll(async () => {
    engine = await startTestEngine(bed, { DURAFLOW_API_KEY: KEY });
  });
  afterAll(() => bed.close(engine));

  async function signIn(): Promise<string> {
    const answer = await call(engine, '/duraflow/login', { method: 'POST', headers: FORM, body: `apiKey=${KEY}` });
    expect(answer.status).toBe(303);
    expect(answer.headers.get('location')).toBe('/duraflow');
    return answer.headers.get('set-cookie')!.split(';')[0];
  }

  it('refuses the dashboard without the key, with a page that leads to the sign-in form', async () => {
    for (const path of ['/duraflow', '/duraflow/dead-letters', '/duraflow/tasks/00000000-0000-4000-8000-000000000000/events']) {
      const refused = await call(engine, path);
      expect([path, refused.status]).toEqual([path, 401]);
      expect(refused.text).toContain('href="/duraflow/login"');
    }
    const form = await call(engine, '/duraflow/login');
    expect(form.status).toBe(200);
    expect(form.text).toContain('<form method="post" action="/duraflow/login">');
    expect(form.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
  });

  it('signs a browser in with the key: an HttpOnly, SameSite=Strict cookie for /duraflow only, which is not the key', async () => {
    const wrong = await call(engine, '/duraflow/login', { method: 'POST', headers: FORM, body: 'apiKey=guess' });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('set-cookie')).toBeNull();
    expect(wrong.text).toContain("That is not the engine's API key.");

    const answer = await call(engine, '/duraflow/login', { method: 'POST', headers: FORM, body: `apiKey=${KEY}` });
    expect(answer.headers.get('set-cookie')).toMatch(
      /^duraflow_session=[\w-]+; Max-Age=43200; Path=\/duraflow; Expires=.*; HttpOnly; SameSite=Strict$/,
    );
    expect(answer.headers.get('set-cookie')).not.toContain(KEY);
    const cookie = answer.headers.get('set-cookie')!.split(';')[0];
    expect((await call(engine, '/duraflow', { headers: { cookie } })).status).toBe(200);
    expect((await call(engine, '/duraflow/login', { headers: { cookie } })).text).toContain('You are signed in.');
    // The session opens the dashboard, never the API.
    expect((await call(engine, '/tasks', { headers: { cookie } })).status).toBe(401);
    expect((await call(engine, '/duraflow', { headers: { cookie: 'duraflow_session=forged' } })).status).toBe(401);
    // The key itself works on the dashboard too (a script, curl).
    expect((await call(engine, '/duraflow', { headers: { 'x-api-key': KEY } })).status).toBe(200);
  });

  it('signs out by clearing the cookie', async () => {
    const cookie = await signIn();
    const out = await call(engine, '/duraflow/logout', { method: 'POST', headers: { cookie } });
    expect(out.status).toBe(303);
    expect(out.headers.get('location')).toBe('/duraflow/login');
    expect(out.headers.get('set-cookie')).toMatch(
      /^duraflow_session=; Path=\/duraflow; Expires=Thu, 01 Jan 1970 00:00:00 GMT; HttpOnly; SameSite=Strict$/,
    );
  });
});

describe('without an API key', () => {
  it('serves the dashboard to anyone who reaches it, and says so on the sign-in page', async () => {
    const engine = await startTestEngine(bed);
    const page = await call(engine, '/duraflow');
    expect(page.status).toBe(200);
    expect(page.text).toContain('<h1>Tasks</h1>');
    expect(page.text).not.toContain('/duraflow/login'); // no sign-in link
    expect((await call(engine, '/duraflow/login')).text).toContain('This engine has no API key');
  });
});
