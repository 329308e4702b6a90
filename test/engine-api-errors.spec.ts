import { status } from '@grpc/grpc-js';
import { SERVER_URL } from './support/database';
import { TcpProxy } from './support/tcp-proxy';
import { CapturedLogs } from './support/captured-logs';
import { http, startTestEngine } from './fixtures/engine/engine-app';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';
import { createDuraflowClient, DuraflowClient } from './fixtures/engine/grpc-client';
import { seedDeadLetter } from './fixtures/engine/seeded-tasks';
import { RunningEngine } from '../src/engine';

const KEY = 'errors-secret';
const AUTH = { 'x-api-key': KEY };
const MAX_INPUT_BYTES = 150_000;
const BOOKING = { customer: 'ada', from: 'AMS', to: 'LIS' };

/** An input of about `bytes` bytes as JSON. */
const inputOf = (bytes: number) => ({ ...BOOKING, notes: 'x'.repeat(bytes - 60) });

/** Every error body: these four properties, no stack, no path of this machine. */
function expectErrorShape(response: { status: number; body: any; text?: string }, statusCode: number, code: string): void {
  expect([response.status, Object.keys(response.body ?? {}).sort(), response.body?.code]).toEqual([
    statusCode,
    ['code', 'details', 'message', 'statusCode'],
    code,
  ]);
  expect(response.body.statusCode).toBe(statusCode);
  const text = JSON.stringify(response.body);
  expect(text).not.toMatch(/\\n\s+at |stack/);
  expect(text).not.toContain(process.cwd());
}

async function raw(engine: RunningEngine, method: string, path: string, body: string, headers: Record<string, string> = AUTH) {
  const response = await fetch(`${engine.httpUrl}${path}`, { method, headers: { 'content-type': 'application/json', ...headers }, body });
  return { status: response.status, body: await response.json() };
}

describe('the engine API: one error shape, typed errors, 503 while the database is away', () => {
  const bed = useTestBed();
  let proxy: TcpProxy;
  let engine: RunningEngine;
  let client: DuraflowClient;
  const logs = new CapturedLogs();

  beforeAll(async () => {
    const server = new URL(SERVER_URL);
    proxy = bed.closeLater(await TcpProxy.start({ targetHost: server.hostname, targetPort: Number(server.port || 5432) }), (opened) =>
      opened.teardown(),
    );
    // A database the test left away comes back first, so the engine closes as it would in production.
    bed.beforeClosing(async () => {
      if (!proxy.running) await proxy.restart().catch(() => undefined);
    });
    engine = await startTestEngine(
      bed,
      { DURAFLOW_API_KEY: KEY, DURAFLOW_MAX_INPUT_BYTES: String(MAX_INPUT_BYTES) },
      { logger: logs, databaseUrl: proxy.proxiedUrl(bed.db.url) },
    );
    client = bed.closeLater(createDuraflowClient(engine.grpcAddress!, AUTH), async (opened) => opened.close());
  });

  const finished = (id: string) =>
    eventually(`task ${id} has ended`, async () => (await http(engine, 'GET', `/tasks/${id}`, { headers: AUTH })).body, {
      until: (task) => !['pending', 'running'].includes(task.status),
    });

  it.each([
    ['a body that is not JSON', () => raw(engine, 'POST', '/tasks', '{"workflowName": "booking",'), 400, 'INVALID_JSON'],
    ['no API key', () => http(engine, 'GET', '/tasks'), 401, 'UNAUTHENTICATED'],
    ['an unknown route', () => http(engine, 'GET', '/no-such-route', { headers: AUTH }), 404, 'NOT_FOUND'],
    [
      'a property of the wrong type',
      () => http(engine, 'POST', '/tasks', { body: { workflowName: 'booking', input: BOOKING, priority: 'high' }, headers: AUTH }),
      400,
      'INVALID_REQUEST',
    ],
    ['an id that is no UUID', () => http(engine, 'GET', '/tasks/nope', { headers: AUTH }), 400, 'INVALID_REQUEST'],
    [
      'a dead-letter id that is no UUID',
      () => http(engine, 'POST', '/dead-letters/nope/discard', { headers: AUTH }),
      400,
      'INVALID_REQUEST',
    ],
    [
      'an unknown workflow',
      () => http(engine, 'POST', '/tasks', { body: { workflowName: 'nope' }, headers: AUTH }),
      404,
      'UNKNOWN_WORKFLOW',
    ],
    ['a bad cursor', () => http(engine, 'GET', '/tasks?cursor=garbage', { headers: AUTH }), 400, 'INVALID_CURSOR'],
  ])('answers %s in the one error shape', async (_what, call, statusCode, code) => {
    expectErrorShape(await call(), statusCode, code);
  });

  it('takes inputs up to DURAFLOW_MAX_INPUT_BYTES (more than Express’s 100 kB), and answers a larger one INPUT_TOO_LARGE', async () => {
    const accepted = await http(engine, 'POST', '/tasks', { body: { workflowName: 'booking', input: inputOf(140_000) }, headers: AUTH });
    expect(accepted.status).toBe(201);

    const refused = await http(engine, 'POST', '/tasks', { body: { workflowName: 'booking', input: inputOf(160_000) }, headers: AUTH });
    expectErrorShape(refused, 413, 'INPUT_TOO_LARGE');
    expect(refused.body.details).toEqual({ workflowName: 'booking', bytes: expect.any(Number), limit: MAX_INPUT_BYTES });
    expect(await bed.rows.count('agent_tasks', 'length(input::text) > $1', [150_000])).toBe(0);

    // Over gRPC too: the message limit follows the same setting.
    const grpc = await client.SubmitTask({ workflow_name: 'booking', input: JSON.stringify(inputOf(160_000)) }).catch((e) => e);
    expect([grpc.code, grpc.metadata.get('error-code')]).toEqual([status.INVALID_ARGUMENT, ['INPUT_TOO_LARGE']]);
  });

  it('answers a body far over the limit REQUEST_TOO_LARGE, logging no stack', async () => {
    const before = logs.lines.length;
    const response: { status: number; body: any } = await raw(
      engine,
      'POST',
      '/tasks',
      JSON.stringify({ workflowName: 'booking', input: inputOf(400_000) }),
    );
    expectErrorShape(response, 413, 'REQUEST_TOO_LARGE');
    expect(response.body.message).toMatch(/The request body is over 365536 bytes/);
    expect(logs.lines.slice(before).join('\n')).not.toMatch(/\n\s+at /);
  });

  it('logs one line per task that fails or rolls back: its id, workflow and code', async () => {
    const submit = async (failAt: string) =>
      (await http(engine, 'POST', '/tasks', { body: { workflowName: 'booking', input: { ...BOOKING, failAt } }, headers: AUTH })).body.id;
    const failed = await submit('flight');
    const rolledBack = await submit('hotel');
    expect((await finished(failed)).status).toBe('failed');
    expect((await finished(rolledBack)).status).toBe('rolled_back');
    const ended = (id: string) => logs.lines.filter((line) => line.includes(id) && / ended /.test(line));
    expect(ended(failed)).toEqual([`WARN [Duraflow] Task ${failed} (booking) ended failed: STEP_FAILED`]);
    expect(ended(rolledBack)).toEqual([`WARN [Duraflow] Task ${rolledBack} (booking) ended rolled_back: STEP_FAILED`]);
  });

  it('lets a person try the dead-letter queue: a booking whose cancellations fail, then retry and discard from the API', async () => {
    const created = await http(engine, 'POST', '/tasks', {
      body: { workflowName: 'booking', input: { ...BOOKING, failAt: 'car', cancelFailures: 3 } },
      headers: AUTH,
    });
    const task = await finished(created.body.id);
    expect(task.status).toBe('partial_rollback');
    expect(logs.lines.filter((line) => line.includes(task.id) && / ended /.test(line))).toEqual([
      `WARN [Duraflow] Task ${task.id} (booking) ended partial_rollback: STEP_FAILED: see its dead letters`,
    ]);
    const { items } = (await http(engine, 'GET', `/dead-letters?taskId=${task.id}`, { headers: AUTH })).body;
    expect(items).toHaveLength(2);
    expect(items[0].error).toMatchObject({
      message: expect.stringMatching(/cancelling (flight|hotel)-ada-AMS-LIS failed \(try 3 of the 3/),
    });

    // The compensation's 4th try works: retried, the entry is gone.
    const retried = await http(engine, 'POST', `/dead-letters/${items[0].id}/retry`, { headers: AUTH });
    expect(retried).toMatchObject({
      status: 200,
      body: { outcome: 'compensated', deadLetter: null, task: { status: 'partial_rollback' } },
    });
    // The other one a person undid by hand: discarded, the task is rolled_back.
    const discarded = await http(engine, 'POST', `/dead-letters/${items[1].id}/discard`, { headers: AUTH });
    expect(discarded).toEqual({ status: 200, body: { task: expect.objectContaining({ id: task.id, status: 'rolled_back' }) } });
    expectErrorShape(await http(engine, 'POST', `/dead-letters/${items[1].id}/discard`, { headers: AUTH }), 404, 'DEAD_LETTER_NOT_FOUND');
    // Only the retried compensation ran: a discarded one is not marked undone by the engine.
    const steps = (await http(engine, 'GET', `/tasks/${task.id}/steps`, { headers: AUTH })).body;
    expect(steps.filter((s: any) => s.compensatedAt !== null).map((s: any) => s.id)).toEqual([items[0].stepId]);
  });

  it('refuses to discard a dead letter whose task is still rolling back (409)', async () => {
    const seeded = await seedDeadLetter(bed.db.client);
    await bed.db.client.query(`UPDATE agent_tasks SET status = 'running', completed_at = NULL WHERE id = $1`, [seeded.taskId]);
    expectErrorShape(
      await http(engine, 'POST', `/dead-letters/${seeded.deadLetterId}/discard`, { headers: AUTH }),
      409,
      'DEAD_LETTER_TASK_ACTIVE',
    );
    await bed.db.client.query(`UPDATE agent_tasks SET status = 'partial_rollback', completed_at = now() WHERE id = $1`, [seeded.taskId]);
  });

  it('answers 503 DATABASE_UNAVAILABLE (UNAVAILABLE over gRPC) while the database cannot be reached, and serves again after', async () => {
    await proxy.stop();
    try {
      expectErrorShape(await http(engine, 'GET', '/tasks', { headers: AUTH }), 503, 'DATABASE_UNAVAILABLE');
      expectErrorShape(
        await http(engine, 'POST', '/tasks', { body: { workflowName: 'booking', input: BOOKING }, headers: AUTH }),
        503,
        'DATABASE_UNAVAILABLE',
      );
      const grpc = await client.ListTasks({}).catch((e) => e);
      expect([grpc.code, grpc.metadata.get('error-code')]).toEqual([status.UNAVAILABLE, ['DATABASE_UNAVAILABLE']]);

      // The health check says what is down, in the same shape (what Redis said is for key holders: engine-http.spec.ts).
      const health = await http(engine, 'GET', '/health');
      expectErrorShape(health, 503, 'UNHEALTHY');
      expect(health.body).toMatchObject({ message: 'Unhealthy: database is down.', details: { database: { status: 'down' } } });
    } finally {
      await proxy.restart();
    }
    await eventually('the API answers again', async () => (await http(engine, 'GET', '/tasks?limit=1', { headers: AUTH })).status, {
      until: (code) => code === 200,
    });
    expect((await http(engine, 'GET', '/health')).body).toEqual({
      status: 'ok',
      info: { database: { status: 'up' } },
      error: {},
      details: { database: { status: 'up' } },
    });
  });

  it('names no registered workflow to a client that asks for an unknown one, over HTTP and gRPC', async () => {
    const response = await http(engine, 'POST', '/tasks', { body: { workflowName: 'nope', input: {} }, headers: AUTH });
    expectErrorShape(response, 404, 'UNKNOWN_WORKFLOW');
    expect(response.body.message).toBe('No workflow named "nope" is registered. Check the workflow name.');
    const grpc = await client.SubmitTask({ workflow_name: 'nope', input: '{}' }).catch((e) => e);
    expect([grpc.code, grpc.details]).toEqual([status.NOT_FOUND, 'No workflow named "nope" is registered. Check the workflow name.']);
    for (const text of [JSON.stringify(response.body), grpc.details]) expect(text).not.toMatch(/booking|order-processing|approval/);
  });

  it('gives every gRPC error the error-code trailer, and INVALID_ARGUMENT to an invalid id in every call', async () => {
    const anonymous = createDuraflowClient(engine.grpcAddress!);
    const wrongKey = createDuraflowClient(engine.grpcAddress!, { 'x-api-key': 'guess' });
    const cases: Array<[string, () => Promise<unknown>, number, string]> = [
      ['GetTask', () => client.GetTask({ id: 'nope' }), status.INVALID_ARGUMENT, 'INVALID_REQUEST'],
      ['GetSteps', () => client.GetSteps({ task_id: 'nope' }), status.INVALID_ARGUMENT, 'INVALID_REQUEST'],
      ['CancelTask', () => client.CancelTask({ id: 'nope' }), status.INVALID_ARGUMENT, 'INVALID_REQUEST'],
      ['ListDeadLetters', () => client.ListDeadLetters({ task_id: 'nope' }), status.INVALID_ARGUMENT, 'INVALID_REQUEST'],
      ['RetryDeadLetter', () => client.RetryDeadLetter({ id: 'nope' }), status.INVALID_ARGUMENT, 'INVALID_REQUEST'],
      ['DiscardDeadLetter', () => client.DiscardDeadLetter({ id: 'nope' }), status.INVALID_ARGUMENT, 'INVALID_REQUEST'],
      ['ListTasks cursor', () => client.ListTasks({ cursor: 'garbage' }), status.INVALID_ARGUMENT, 'INVALID_CURSOR'],
      ['SubmitTask input', () => client.SubmitTask({ workflow_name: 'booking', input: '{' }), status.INVALID_ARGUMENT, 'INVALID_JSON'],
      ['SubmitTask workflow', () => client.SubmitTask({ workflow_name: 'nope' }), status.NOT_FOUND, 'UNKNOWN_WORKFLOW'],
      ['GetTask unknown', () => client.GetTask({ id: '00000000-0000-4000-8000-000000000000' }), status.NOT_FOUND, 'TASK_NOT_FOUND'],
      ['no key', () => anonymous.ListTasks({}), status.UNAUTHENTICATED, 'UNAUTHENTICATED'],
      ['wrong key', () => wrongKey.DiscardDeadLetter({ id: 'nope' }), status.UNAUTHENTICATED, 'UNAUTHENTICATED'],
    ];
    try {
      for (const [name, call, code, errorCode] of cases) {
        const error: any = await call().then(
          () => undefined,
          (e) => e,
        );
        expect([name, error?.code, error?.metadata?.get('error-code')]).toEqual([name, code, [errorCode]]);
        expect(error.details).not.toMatch(/\n\s+at /);
      }
    } finally {
      anonymous.close();
      wrongKey.close();
    }
  });
});
