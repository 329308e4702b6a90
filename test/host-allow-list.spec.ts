import { EngineConfigError, loadEngineConfig } from '../src/config/engine.config';
import { http, startTestEngine } from './fixtures/engine/engine-app';
import { rawRequest } from './support/raw-http';
import { useTestBed } from './support/test-bed';

/**
 * Issue 35.3: the engine answers only to the host names it knows. A page of another site that
 * makes its own name resolve to this machine (DNS rebinding) sends `Host` and `Origin` with that
 * name; without the check it read every task and cancelled one on a keyless loopback engine.
 * And a plain HTML form of any site (url-encoded, multipart, text) no longer reaches the JSON API.
 */

const REBOUND = 'rebind.attacker.example';
const KEY = 'host-check-key';

const bed = useTestBed();

async function approvalTask(engine: { httpUrl: string | undefined }, headers: Record<string, string> = {}): Promise<string> {
  const submitted = await http(engine, 'POST', '/tasks', { body: { workflowName: 'approval', input: { request: 'r-1' } }, headers });
  expect(submitted.status).toBe(201);
  return submitted.body.id;
}

describe('a keyless engine bound to loopback', () => {
  it('answers 421 to a rebound host name, on the dashboard and the API, before anything changes', async () => {
    const engine = await startTestEngine(bed);
    const id = await approvalTask(engine);
    const rebound = { host: `${REBOUND}:${new URL(engine.httpUrl!).port}`, origin: `http://${REBOUND}` };

    const cancel = await rawRequest(`${engine.httpUrl}/duraflow/tasks/${id}/cancel`, { method: 'POST', headers: rebound });
    expect(cancel.status).toBe(421);
    expect(JSON.parse(cancel.text)).toMatchObject({ statusCode: 421, code: 'MISDIRECTED_REQUEST' });
    expect(cancel.text).toContain('DURAFLOW_ALLOWED_HOSTS');
    const list = await rawRequest(`${engine.httpUrl}/tasks`, { headers: rebound });
    expect(list.status).toBe(421);
    expect(list.text).not.toContain(id);
    expect((await rawRequest(`${engine.httpUrl}/duraflow`, { headers: rebound })).status).toBe(421);
    expect((await rawRequest(`${engine.httpUrl}/health`, { headers: rebound })).status).toBe(421);
    expect((await http(engine, 'GET', `/tasks/${id}`)).body.status).not.toBe('cancelled');

    // What reaches this machine by its own names and addresses.
    const port = new URL(engine.httpUrl!).port;
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, '10.1.2.3', 'LOCALHOST']) {
      expect([host, (await rawRequest(`${engine.httpUrl}/tasks`, { headers: { host } })).status]).toEqual([host, 200]);
    }
  });

  it('also answers to the names in DURAFLOW_ALLOWED_HOSTS (a name alone: any port)', async () => {
    const engine = await startTestEngine(bed, { DURAFLOW_ALLOWED_HOSTS: 'engine.internal, ops.example.com:8443' });
    const status = async (host: string) => (await rawRequest(`${engine.httpUrl}/tasks`, { headers: { host } })).status;
    expect(await status('engine.internal')).toBe(200);
    expect(await status('Engine.Internal:3000')).toBe(200);
    expect(await status('ops.example.com:8443')).toBe(200);
    expect(await status('ops.example.com')).toBe(421);
    expect(await status(REBOUND)).toBe(421);
  });
});

describe('with DURAFLOW_API_KEY', () => {
  it('answers to any host name, the key being what protects it', async () => {
    const engine = await startTestEngine(bed, { DURAFLOW_API_KEY: KEY });
    expect((await rawRequest(`${engine.httpUrl}/tasks`, { headers: { host: 'engine.prod.example', 'x-api-key': KEY } })).status).toBe(200);
  });

  it('answers only to DURAFLOW_ALLOWED_HOSTS when it is given', async () => {
    const engine = await startTestEngine(bed, { DURAFLOW_API_KEY: KEY, DURAFLOW_ALLOWED_HOSTS: 'engine.prod.example' });
    const status = async (host: string) => (await rawRequest(`${engine.httpUrl}/tasks`, { headers: { host, 'x-api-key': KEY } })).status;
    expect(await status('engine.prod.example')).toBe(200);
    expect(await status(REBOUND)).toBe(421);
  });
});

describe('request bodies', () => {
  it("refuses a form's body on the API (415) and creates nothing; the dashboard's forms still post", async () => {
    const engine = await startTestEngine(bed, { DURAFLOW_API_KEY: KEY });
    const before = (await http(engine, 'GET', '/tasks', { headers: { 'x-api-key': KEY } })).body.items.length;
    for (const [type, body] of [
      ['application/x-www-form-urlencoded', 'workflowName=booking&input=x'],
      ['text/plain', '{"workflowName":"booking"}'],
      ['multipart/form-data; boundary=b', '--b\r\nContent-Disposition: form-data; name="workflowName"\r\n\r\nbooking\r\n--b--\r\n'],
    ]) {
      const answer = await fetch(`${engine.httpUrl}/tasks`, { method: 'POST', headers: { 'content-type': type, 'x-api-key': KEY }, body });
      expect([type, answer.status]).toEqual([type, 415]);
      expect(await answer.json()).toMatchObject({ code: 'UNSUPPORTED_MEDIA_TYPE', message: expect.stringContaining('application/json') });
    }
    expect((await http(engine, 'GET', '/tasks', { headers: { 'x-api-key': KEY } })).body.items.length).toBe(before);

    const signIn = await fetch(`${engine.httpUrl}/duraflow/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `apiKey=${KEY}`,
    });
    expect(signIn.status).toBe(303);
  });
});

describe('a keyless engine and requests pages of other sites make', () => {
  it('refuses them on the API (403) whatever their body, so a bodiless cross-site POST cancels nothing', async () => {
    const engine = await startTestEngine(bed, {});
    const id = await approvalTask(engine);
    for (const site of ['cross-site', 'same-site']) {
      const answer = await fetch(`${engine.httpUrl}/tasks/${id}/cancel`, { method: 'POST', headers: { 'sec-fetch-site': site } });
      expect([site, answer.status]).toEqual([site, 403]);
    }
    // Not cancelled: still waiting for its worker, or already run up to its wait by it.
    expect(['pending', 'running']).toContain((await http(engine, 'GET', `/tasks/${id}`)).body.status);
    const own = await fetch(`${engine.httpUrl}/tasks/${id}`, { headers: { 'sec-fetch-site': 'same-origin' } });
    expect(own.status).toBe(200);
  });
});

describe('DURAFLOW_ALLOWED_HOSTS', () => {
  it('takes host names with optional ports and refuses anything else', () => {
    expect(loadEngineConfig({ DURAFLOW_ALLOWED_HOSTS: 'A.example, b.example:8080,[::1]' }).allowedHosts).toEqual([
      'a.example',
      'b.example:8080',
      '[::1]',
    ]);
    for (const value of ['http://a.example', 'a.example/path', 'a.example,,b', '*.example']) {
      expect(() => loadEngineConfig({ DURAFLOW_ALLOWED_HOSTS: value })).toThrow(EngineConfigError);
    }
  });
});
