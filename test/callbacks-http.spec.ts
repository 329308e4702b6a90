import { randomUUID } from 'node:crypto';
import {
  CallbackHandle,
  DuraflowCallbacksModule,
  DuraflowModule,
  InvalidDuraflowOptionsError,
  DuraflowDashboardModule,
  DuraflowModuleOptions,
  WorkflowContext,
  WorkflowService,
  workflow,
} from '@duraflow/nestjs';
import { OPERATOR_HEADERS, OperatorGuard } from './fixtures/dashboard/dashboard-app';
import { signCallbackToken } from '../libs/duraflow/src/util/callback-token';
import { http, startTestEngine } from './fixtures/engine/engine-app';
import { SUBMIT_ONLY, TestHttpApp, useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';
import { rawRequest } from './support/raw-http';

/*
 * The route callback urls point at, in a host app (a real HTTP server) and in the engine: the
 * first valid POST wins (202) and wakes the run; a repeat gets 409, an expired callback or one of
 * a finished task 410, a forged or unknown token 404, a body over the limit 413, a body that is
 * not JSON 400, and none of them changes anything. Two racing POSTs: one 202, one 409. A POST
 * while no worker runs is taken when one starts. The engine exempts the route from its API key
 * and keeps its host allow-list.
 */

const bed = useTestBed();
const SECRET = 'another-test-secret-of-32-bytes-or-more';
const BASE_URL = 'https://hooks.example.com';
const seen = new Map<string, CallbackHandle>();

const approval = workflow('http-approval', async (ctx: WorkflowContext<{ timeoutMs?: number }>) => {
  const cb = await ctx.createCallback('approval', { timeoutMs: ctx.input?.timeoutMs });
  seen.set(ctx.runId, cb);
  return { body: await ctx.waitForCallback(cb) };
});

/** A key that is markup: the dashboard must show it as text. */
const markupKey = workflow('http-markup-key', async (ctx: WorkflowContext) => {
  const cb = await ctx.createCallback('<i>sign</i>', { timeoutMs: 3_600_000 });
  seen.set(ctx.runId, cb);
  return { body: await ctx.waitForCallback(cb) };
});

const opensOnly = workflow('http-opens-only', async (ctx: WorkflowContext) => {
  seen.set(ctx.runId, await ctx.createCallback('unwaited'));
  return 'done';
});

function serve(options: DuraflowModuleOptions = {}, withDashboard = false): Promise<TestHttpApp> {
  return bed.serve({
    imports: withDashboard ? [DuraflowDashboardModule.forRoot({ path: '/ops/duraflow', guards: [OperatorGuard] })] : [],
    duraflow: {
      ...options,
      callbacks: { baseUrl: BASE_URL, secret: SECRET, maxBodyBytes: 256 },
      workflows: [approval, opensOnly, markupKey],
      worker: { shutdownTimeoutMs: 100, ...options.worker },
    },
  });
}

/** The handle's url on the test server: the same path and token, on 127.0.0.1. */
function onServer(app: TestHttpApp, url: string): string {
  expect(url.startsWith(`${BASE_URL}/duraflow/callbacks/`)).toBe(true);
  return app.url + url.slice(BASE_URL.length);
}

async function post(url: string, body: string, contentType = 'application/json', headers: Record<string, string> = {}) {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': contentType, ...headers }, body });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

async function waitingFor(app: TestHttpApp, name: string, input: unknown = {}): Promise<{ taskId: string; url: string }> {
  const task = await app.app.get(WorkflowService).submit(name, input);
  await eventually('the task waits for its callback', async () =>
    (await bed.rows.steps(task.id)).some((step) => step.kind === 'signal' && step.status === 'waiting'),
  );
  return { taskId: task.id, url: onServer(app, seen.get(task.id)!.url) };
}

async function snapshot(taskId: string) {
  const callbacks = (await bed.db.client.query(`SELECT * FROM task_callbacks WHERE task_id = $1`, [taskId])).rows;
  const signals = (await bed.db.client.query(`SELECT id, consumed_at FROM task_signals WHERE task_id = $1`, [taskId])).rows;
  const steps = (await bed.rows.steps(taskId)).map((step) => [step.step_key, step.status]);
  return { callbacks, signals, steps, status: (await bed.rows.task(taskId)).status };
}

describe('callback urls over HTTP', () => {
  it('202 for the first valid POST (the run resumes with its JSON), 409 for a repeat, which changes nothing', async () => {
    const app = await serve();
    const { taskId, url } = await waitingFor(app, 'http-approval');

    const first = await post(url, JSON.stringify({ approved: true, by: 'ada' }));

    expect(first).toEqual({ status: 202, body: { callbackId: seen.get(taskId)!.id, taskId } });
    expect(await app.app.get(WorkflowService).waitFor(taskId, { timeoutMs: 10_000 })).toMatchObject({
      status: 'completed',
      output: { body: { approved: true, by: 'ada' } },
    });
    const before = await snapshot(taskId);
    const repeat = await post(url, JSON.stringify({ approved: false }));
    expect(repeat).toMatchObject({ status: 409, body: { code: 'CALLBACK_ALREADY_COMPLETED' } });
    expect(await snapshot(taskId)).toEqual(before);
  });

  it('404 for a forged, altered or unknown token; 400 for a body that is not JSON; 413 over maxBodyBytes: none changes anything', async () => {
    const app = await serve();
    const { taskId, url } = await waitingFor(app, 'http-approval');
    const before = await snapshot(taskId);
    const [token] = url.split('/').slice(-1);
    const [claims, signature] = token.split('.');
    const base = url.slice(0, url.length - token.length);
    const flipped = `${signature.slice(0, 10)}${signature[10] === 'A' ? 'B' : 'A'}${signature.slice(11)}`;
    const unknown = signCallbackToken(SECRET, { taskId, callbackId: randomUUID(), key: 'approval', expiresAt: null });
    const otherSecret = signCallbackToken('x'.repeat(40), { taskId, callbackId: seen.get(taskId)!.id, key: 'approval', expiresAt: null });

    for (const forged of [`${claims}.${flipped}`, unknown, otherSecret, 'not-a-token', `${claims}x.${signature}`]) {
      expect(await post(base + forged, '{"approved":true}')).toMatchObject({ status: 404, body: { code: 'CALLBACK_NOT_FOUND' } });
    }
    expect(await post(url, 'yes please', 'text/plain')).toMatchObject({ status: 400, body: { code: 'INVALID_CALLBACK_PAYLOAD' } });
    expect((await post(url, '{"approved": tru', 'application/json')).status).toBe(400);
    expect(await post(url, '', 'text/plain')).toMatchObject({ status: 400 });
    const large = JSON.stringify({ note: 'x'.repeat(400) });
    expect(await post(url, large)).toMatchObject({ status: 413, body: { code: 'CALLBACK_PAYLOAD_TOO_LARGE' } });
    expect(await post(url, large, 'text/plain')).toMatchObject({ status: 413, body: { code: 'CALLBACK_PAYLOAD_TOO_LARGE' } });

    expect(await snapshot(taskId)).toEqual(before);
    expect((await post(url, '"finally"', 'text/plain')).status).toBe(202);
  });

  it('410 for an expired callback and for one whose task finished, changing nothing', async () => {
    const app = await serve();
    const workflows = app.app.get(WorkflowService);
    const expiring = await workflows.submit('http-approval', { timeoutMs: 100 });
    const timedOut = await workflows.waitFor(expiring.id, { timeoutMs: 10_000 });
    expect(timedOut).toMatchObject({ status: 'failed', error: { code: 'CALLBACK_TIMEOUT' } });
    const finished = await workflows.submit('http-opens-only');
    await workflows.waitFor(finished.id, { timeoutMs: 10_000 });

    for (const taskId of [expiring.id, finished.id]) {
      const before = await snapshot(taskId);
      expect(await post(onServer(app, seen.get(taskId)!.url), '{}')).toMatchObject({ status: 410, body: { code: 'CALLBACK_CLOSED' } });
      expect(await snapshot(taskId)).toEqual(before);
    }
  });

  it('with forRootAsync, DuraflowCallbacksModule mounts the route; a path other than the options’ stops the boot', async () => {
    const asyncModule = () =>
      DuraflowModule.forRootAsync({
        useFactory: () => ({
          callbacks: { baseUrl: BASE_URL, secret: SECRET, path: '/hooks' },
          workflows: [approval],
          worker: { pollIntervalMs: 50, shutdownTimeoutMs: 100 },
        }),
      });
    const app = await bed.serve({ duraflowModule: asyncModule(), imports: [DuraflowCallbacksModule.forRoot({ path: '/hooks' })] });
    const task = await app.app.get(WorkflowService).submit('http-approval', {});
    await eventually('the task waits for its callback', async () =>
      (await bed.rows.steps(task.id)).some((step) => step.kind === 'signal' && step.status === 'waiting'),
    );
    const { url } = seen.get(task.id)!;
    expect(url.startsWith(`${BASE_URL}/hooks/`)).toBe(true);

    expect((await post(app.url + url.slice(BASE_URL.length), '{"via":"async"}')).status).toBe(202);
    expect(await app.app.get(WorkflowService).waitFor(task.id, { timeoutMs: 10_000 })).toMatchObject({
      output: { body: { via: 'async' } },
    });

    const refused = await bed.bootFailure({ duraflowModule: asyncModule(), imports: [DuraflowCallbacksModule.forRoot()] });
    expect(refused).toBeInstanceOf(InvalidDuraflowOptionsError);
    expect((refused as Error).message).toContain('"/duraflow/callbacks"');
  });

  it('lets exactly one of two racing POSTs win: one 202, one 409', async () => {
    const app = await serve();
    const { taskId, url } = await waitingFor(app, 'http-approval');

    const statuses = (await Promise.all([post(url, '{"n":1}'), post(url, '{"n":2}')])).map((reply) => reply.status).sort();

    expect(statuses).toEqual([202, 409]);
    const done = await app.app.get(WorkflowService).waitFor(taskId, { timeoutMs: 10_000 });
    const [row] = (await bed.db.client.query(`SELECT payload FROM task_callbacks WHERE task_id = $1`, [taskId])).rows;
    expect(done.output).toEqual({ body: row.payload });
  });

  it('takes a POST made while no worker runs: the task resumes when a worker starts', async () => {
    const worker = await serve();
    const { taskId, url } = await waitingFor(worker, 'http-approval');
    const token = url.slice(worker.url.length);
    await worker.close();

    const apiOnly = await serve(SUBMIT_ONLY);
    expect((await post(apiOnly.url + token, '{"while":"no worker"}')).status).toBe(202);
    expect(await bed.rows.task(taskId)).toMatchObject({ status: 'pending' });

    const next = await serve();
    expect(await next.app.get(WorkflowService).waitFor(taskId, { timeoutMs: 10_000 })).toMatchObject({
      status: 'completed',
      output: { body: { while: 'no worker' } },
    });
  });

  it('the engine mounts the route outside its API key (the token is the credential) and behind its host allow-list', async () => {
    const engine = await startTestEngine(bed, {
      DURAFLOW_API_KEY: 'engine-key-engine-key',
      DURAFLOW_ALLOWED_HOSTS: 'engine.example.com',
      DURAFLOW_CALLBACK_BASE_URL: 'https://engine.example.com',
      DURAFLOW_CALLBACK_SECRET: SECRET,
    });
    const key = { 'x-api-key': 'engine-key-engine-key' };
    const created = await http(engine, 'POST', '/tasks', {
      body: { workflowName: 'approval-link', input: { request: 'laptop' } },
      headers: key,
    });
    expect(created.status).toBe(201);
    // The url, as an operator finds it: the output of the step callback:decision.
    const step = await eventually('the callback is open', async () =>
      ((await http(engine, 'GET', `/tasks/${created.body.id}/steps`, { headers: key })).body as Array<Record<string, any>>).find(
        (row) => row.stepKey === 'callback:decision' && row.status === 'completed',
      ),
    );
    const url = `${engine.httpUrl}${(step!.output.url as string).slice('https://engine.example.com'.length)}`;

    expect(await post(url.replace(/\.[^.]+$/, '.forged'), '{}')).toMatchObject({ status: 404 });
    const misdirected = await rawRequest(url, {
      method: 'POST',
      headers: { host: 'elsewhere.example.org', 'content-type': 'application/json' },
      body: '{}',
    });
    expect(misdirected.status).toBe(421);
    expect(await post(url, 'not json', 'text/plain')).toMatchObject({ status: 400, body: { code: 'INVALID_CALLBACK_PAYLOAD' } });
    expect((await http(engine, 'GET', `/tasks/${created.body.id}`)).status).toBe(401);

    expect((await post(url, '{"approved":true}')).status).toBe(202);
    const done = await eventually(
      'the task has ended',
      async () => (await http(engine, 'GET', `/tasks/${created.body.id}`, { headers: key })).body,
      {
        until: (task) => task.status === 'completed',
      },
    );
    expect(done.output).toEqual({ request: 'laptop', approved: true });
  });

  it('the dashboard lists a run’s callbacks (escaped, the url to copy) and completes an open one from its form, same-origin only', async () => {
    const app = await serve({}, true);
    const { taskId } = await waitingFor(app, 'http-markup-key');
    const handle = seen.get(taskId)!;
    const mount = `${app.url}/ops/duraflow`;
    const get = (path: string) => fetch(`${mount}${path}`, { headers: OPERATOR_HEADERS, redirect: 'manual' });
    const postForm = (path: string, payload: string, headers: Record<string, string>) =>
      fetch(`${mount}${path}`, {
        method: 'POST',
        headers: { ...OPERATOR_HEADERS, ...headers },
        body: new URLSearchParams({ payload }),
        redirect: 'manual',
      });

    const pageText = await (await get(`/tasks/${taskId}`)).text();
    const section = pageText.slice(pageText.indexOf('<h2>Callbacks'));
    expect(section).toMatch(/^<h2>Callbacks \(1\)<\/h2>/);
    expect(section).toContain('<code>&lt;i&gt;sign&lt;/i&gt;</code>');
    expect(section).not.toContain('<i>sign</i>');
    expect(section).toContain(`value="${handle.url}"`);
    const formPath = `/tasks/${taskId}/callbacks/${handle.id}`;
    expect(section).toContain(`href="/ops/duraflow${formPath}"`);
    const form = await get(formPath);
    expect(form.status).toBe(200);
    expect(await form.text()).toContain(`action="/ops/duraflow${formPath}"`);

    const before = await snapshot(taskId);
    expect((await postForm(formPath, '{"ok":true}', { 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    const notJson = await postForm(formPath, '<b>nope</b>', { 'sec-fetch-site': 'same-origin' });
    expect(notJson.status).toBe(400);
    const notJsonText = await notJson.text();
    expect(notJsonText).toContain('The body is not JSON');
    expect(notJsonText).toContain('&lt;b&gt;nope&lt;/b&gt;</textarea>');
    expect(await snapshot(taskId)).toEqual(before);

    const done = await postForm(formPath, '{"approved":"by the operator"}', { 'sec-fetch-site': 'same-origin' });
    expect(done.status).toBe(303);
    expect(done.headers.get('location')).toBe(`/ops/duraflow/tasks/${taskId}?notice=callback-completed`);
    expect(await app.app.get(WorkflowService).waitFor(taskId, { timeoutMs: 10_000 })).toMatchObject({
      status: 'completed',
      output: { body: { approved: 'by the operator' } },
    });
    const again = await postForm(formPath, '{}', { 'sec-fetch-site': 'same-origin' });
    expect(again.status).toBe(409);
    expect(await again.text()).toContain('CALLBACK_ALREADY_COMPLETED');
  });
});
