import { randomUUID } from 'node:crypto';
import { SchedulerRegistry } from '@nestjs/schedule';
import { DuraflowModuleOptions, REAPER_INTERVAL_NAME, WorkerService } from '@duraflow/nestjs';
import { DURAFLOW_MODULE_OPTIONS } from '@duraflow/nestjs/config/duraflow.module-definition';
import { RedisServer, SHARED_REDIS_URL } from './support/redis-server';
import { http, startTestEngine } from './fixtures/engine/engine-app';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';
import { seedBookedFlight, seedDeadLetter, seedLargeTasks } from './fixtures/engine/seeded-tasks';
import { INestApplication } from '@nestjs/common';
import { AddressInfo } from 'node:net';
import { CapturedLogs } from './support/captured-logs';
import { RunningEngine } from '../src/engine';
import { OrderGateway } from '../src/workflows/order-processing.workflow';

const MISSING_ID = '00000000-0000-4000-8000-000000000000';
const LATER = new Date(Date.now() + 3_600_000).toISOString();
const BOOKING = { customer: 'ada', from: 'AMS', to: 'LIS' };

const bed = useTestBed();

describe('the engine HTTP API', () => {
  let engine: RunningEngine;

  beforeAll(async () => {
    engine = await startTestEngine(bed);
  });
  afterAll(() => bed.close(engine));

  const finished = (id: string) =>
    eventually(`task ${id} has ended`, async () => (await http(engine, 'GET', `/tasks/${id}`)).body, {
      until: (task) => !['pending', 'running'].includes(task.status),
    });

  describe('POST /tasks', () => {
    it('answers 201 with the pending task; GET /tasks/:id and /steps show it completed', async () => {
      const created = await http(engine, 'POST', '/tasks', { body: { workflowName: 'booking', input: BOOKING, priority: 2 } });
      expect(created.status).toBe(201);
      expect(created.body).toMatchObject({
        id: expect.any(String),
        status: 'pending',
        workflowName: 'booking',
        priority: 2,
        input: BOOKING,
      });

      const done = await finished(created.body.id);
      expect(done).toMatchObject({
        status: 'completed',
        output: { flight: 'flight-ada-AMS-LIS', hotel: 'hotel-ada-AMS-LIS', car: 'car-ada-AMS-LIS' },
      });
      const steps = await http(engine, 'GET', `/tasks/${created.body.id}/steps`);
      expect(steps.status).toBe(200);
      expect(steps.body.map((s: any) => [s.stepKey, s.status])).toEqual([
        ['book-flight', 'completed'],
        ['book-hotel', 'completed'],
        ['book-car', 'completed'],
      ]);
    });

    it('runs a booking whose hotel fails to rolled_back, the flight compensated', async () => {
      const created = await http(engine, 'POST', '/tasks', { body: { workflowName: 'booking', input: { ...BOOKING, failAt: 'hotel' } } });
      expect((await finished(created.body.id)).status).toBe('rolled_back');
      const steps = (await http(engine, 'GET', `/tasks/${created.body.id}/steps`)).body;
      expect(steps.map((s: any) => [s.stepKey, s.status, s.compensatedAt !== null])).toEqual([
        ['book-flight', 'completed', true],
        ['book-hotel', 'failed', false],
      ]);
    });

    it('passes scheduledAt, maxRetries and idempotencyKey through: 201 for a new task, 200 for the one a key already made', async () => {
      const body = { workflowName: 'booking', input: BOOKING, scheduledAt: LATER, maxRetries: 0, idempotencyKey: 'http-once' };
      const first = await http(engine, 'POST', '/tasks', { body });
      const again = await http(engine, 'POST', '/tasks', { body });
      expect([first.status, again.status]).toEqual([201, 200]);
      expect(again.body.id).toBe(first.body.id);
      expect(first.body).toMatchObject({ status: 'pending', maxRetries: 0, idempotencyKey: 'http-once', scheduledAt: LATER });
    });

    it('answers 409 IDEMPOTENCY_KEY_CONFLICT to a key reused with another input, and writes nothing', async () => {
      const body = { workflowName: 'booking', input: BOOKING, scheduledAt: LATER, idempotencyKey: 'http-conflict' };
      const first = await http(engine, 'POST', '/tasks', { body });
      const before = await bed.rows.count('agent_tasks');
      const conflict = await http(engine, 'POST', '/tasks', { body: { ...body, input: { ...BOOKING, customer: 'someone-else' } } });
      expect(conflict.status).toBe(409);
      expect(conflict.body).toMatchObject({
        statusCode: 409,
        code: 'IDEMPOTENCY_KEY_CONFLICT',
        details: expect.objectContaining({ taskId: first.body.id }),
      });
      expect(await bed.rows.count('agent_tasks')).toBe(before);
    });

    it('answers 404 for an unknown workflow', async () => {
      const response = await http(engine, 'POST', '/tasks', { body: { workflowName: 'no-such-flow', input: {} } });
      expect(response.status).toBe(404);
      expect(response.body).toEqual({
        statusCode: 404,
        code: 'UNKNOWN_WORKFLOW',
        message: expect.stringMatching(/No workflow named "no-such-flow"/),
        details: { workflowName: 'no-such-flow' },
      });
    });

    it('answers 400 with the violations for input failing the workflow DTO', async () => {
      const response = await http(engine, 'POST', '/tasks', { body: { workflowName: 'booking', input: { ...BOOKING, failAt: 'boat' } } });
      expect(response.status).toBe(400);
      expect(response.body).toMatchObject({
        statusCode: 400,
        code: 'INVALID_INPUT',
        message: expect.stringMatching(/failAt must be one of the following values: flight, hotel, car/),
        details: { violations: [{ property: 'failAt', constraints: { isIn: expect.any(String) } }] },
      });
    });

    it('answers 400 naming what is wrong with the request body', async () => {
      const cases: Array<[object, RegExp]> = [
        [{ input: BOOKING }, /workflowName must be a string/],
        [{ workflowName: 'bad name!', input: BOOKING }, /workflowName must be 1 to 255 letters/],
        [{ workflowName: 'booking', input: BOOKING, priority: 1.5 }, /priority must be an integer/],
        [{ workflowName: 'booking', input: BOOKING, scheduledAt: 'tomorrow' }, /scheduledAt must be an ISO-8601 date string/],
        [{ workflowName: 'booking', input: BOOKING, maxRetries: -1 }, /maxRetries must not be less than 0/],
        [{ workflowName: 'booking', input: BOOKING, workflow_name: 'booking' }, /property workflow_name should not exist/],
      ];
      for (const [body, message] of cases) {
        const response = await http(engine, 'POST', '/tasks', { body });
        expect(response.status).toBe(400);
        expect(response.body).toMatchObject({
          statusCode: 400,
          code: 'INVALID_REQUEST',
          message: expect.stringMatching(message),
          details: { violations: expect.any(Array) },
        });
      }
    });
  });

  describe('GET /tasks', () => {
    it('lists newest first by status and workflowName, page by page', async () => {
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const body = { workflowName: 'order-processing', input: { orderId: `h${i}` }, scheduledAt: LATER };
        ids.push((await http(engine, 'POST', '/tasks', { body })).body.id);
      }
      const first = await http(engine, 'GET', '/tasks?status=pending&workflowName=order-processing&limit=2');
      expect(first.status).toBe(200);
      expect(first.body.items.map((t: any) => t.id)).toEqual([ids[2], ids[1]]);
      const cursor = encodeURIComponent(first.body.nextCursor);
      const second = await http(engine, 'GET', `/tasks?status=pending&workflowName=order-processing&limit=2&cursor=${cursor}`);
      expect(second.body).toEqual({ items: [expect.objectContaining({ id: ids[0] })], nextCursor: null });
    });

    it('submits with tags (shown as tags, {} when none) and filters on ?tag=k:v, repeatable as an AND; 400 for bad tags', async () => {
      const submit = async (tags?: Record<string, string>) => {
        const body = { workflowName: 'order-processing', input: { orderId: 'tagged' }, scheduledAt: LATER, tags };
        return (await http(engine, 'POST', '/tasks', { body })).body;
      };
      const acmeEu = await submit({ tenant: 'http-acme', region: 'eu' });
      const acmeUs = await submit({ tenant: 'http-acme', region: 'us' });
      const untagged = await submit();
      expect(acmeEu.tags).toEqual({ tenant: 'http-acme', region: 'eu' });
      expect((await http(engine, 'GET', `/tasks/${untagged.id}`)).body.tags).toEqual({});
      const ids = async (query: string) => (await http(engine, 'GET', `/tasks?${query}`)).body.items.map((t: any) => t.id);
      expect(await ids('tag=tenant:http-acme')).toEqual([acmeUs.id, acmeEu.id]);
      expect(await ids('tag=tenant:http-acme&tag=region:eu')).toEqual([acmeEu.id]);
      const dryRun = await http(engine, 'POST', '/tasks/cancel', { body: { tags: { tenant: 'http-acme', region: 'us' }, dryRun: true } });
      expect(dryRun.body).toEqual({ matched: 1, changed: 0 });
      for (const query of ['tag=tenant', 'tag=bad%20key:v', 'tag=a:1&tag=a:2']) {
        const response = await http(engine, 'GET', `/tasks?${query}`);
        expect(response.status).toBe(400);
        expect(response.body.code).toBe('INVALID_LIST_OPTIONS');
      }
      const refused = await http(engine, 'POST', '/tasks', { body: { workflowName: 'order-processing', tags: { tenant: 5 } } });
      expect(refused.status).toBe(400);
      expect(refused.body.code).toBe('INVALID_SUBMIT_OPTIONS');
    });

    it('answers 400 for a bad status, limit or cursor', async () => {
      const cases: Array<[string, RegExp]> = [
        ['status=done', /status must be one of pending, running, completed, failed, cancelled, rolled_back, partial_rollback/],
        ['limit=abc', /limit must be an integer/],
        ['limit=0', /limit must not be less than 1/],
        ['cursor=garbage', /cursor/],
      ];
      for (const [query, message] of cases) {
        const response = await http(engine, 'GET', `/tasks?${query}`);
        expect(response.status).toBe(400);
        expect(response.body.message).toMatch(message);
      }
    });
  });

  describe('GET /tasks/:id and /tasks/:id/steps', () => {
    it('answer 404 for an unknown task and 400 for an id that is no UUID', async () => {
      for (const path of [`/tasks/${MISSING_ID}`, `/tasks/${MISSING_ID}/steps`]) {
        const response = await http(engine, 'GET', path);
        expect(response.status).toBe(404);
        expect(response.body.message).toMatch(/No task with id/);
      }
      const response = await http(engine, 'GET', '/tasks/not-a-uuid');
      expect(response.status).toBe(400);
      expect(response.body.message).toBe('id must be a UUID.');
    });
  });

  describe('POST /tasks/:id/cancel', () => {
    it('cancels a pending task (200), then answers 409 because it finished; 404 for an unknown task', async () => {
      const task = (await http(engine, 'POST', '/tasks', { body: { workflowName: 'booking', input: BOOKING, scheduledAt: LATER } })).body;
      const cancelled = await http(engine, 'POST', `/tasks/${task.id}/cancel`);
      expect(cancelled).toMatchObject({ status: 200, body: { id: task.id, status: 'cancelled' } });
      const again = await http(engine, 'POST', `/tasks/${task.id}/cancel`);
      expect(again.status).toBe(409);
      expect(again.body).toMatchObject({
        code: 'TASK_ALREADY_FINISHED',
        message: expect.stringMatching(/already finished with status "cancelled"/),
      });
      expect((await http(engine, 'POST', `/tasks/${MISSING_ID}/cancel`)).status).toBe(404);
    });

    it('resumes a task the determinism guard holds (200); 409 TASK_NOT_HELD for one it does not hold, 404 for an unknown one', async () => {
      const task = (await http(engine, 'POST', '/tasks', { body: { workflowName: 'booking', input: BOOKING, scheduledAt: LATER } })).body;
      expect(task.workflowVersion).toBeNull();
      const notHeld = await http(engine, 'POST', `/tasks/${task.id}/resume`);
      expect(notHeld).toMatchObject({ status: 409, body: { code: 'TASK_NOT_HELD' } });
      // Held as the guard leaves a task: pending, held_at, its NonDeterminismError.
      await bed.db.client.query(
        `UPDATE agent_tasks SET held_at = now(), error = '{"code":"NON_DETERMINISM","recordedStep":"book-hotel","requestedStep":"book-car"}' WHERE id = $1`,
        [task.id],
      );
      const held = await http(engine, 'GET', `/tasks/${task.id}`);
      expect(held.body).toMatchObject({ status: 'pending', heldAt: expect.any(String), error: { code: 'NON_DETERMINISM' } });
      const resumed = await http(engine, 'POST', `/tasks/${task.id}/resume`);
      expect(resumed).toMatchObject({ status: 200, body: { id: task.id, status: 'pending', heldAt: null, error: null } });
      expect((await http(engine, 'POST', `/tasks/${MISSING_ID}/resume`)).status).toBe(404);
      await http(engine, 'POST', `/tasks/${task.id}/cancel`);
    });

    it('undoes the completed steps with compensate: true, in the body or the query', async () => {
      const plain = await seedBookedFlight(bed.db.client, 'pending');
      const byBody = await seedBookedFlight(bed.db.client, 'pending');
      const byQuery = await seedBookedFlight(bed.db.client, 'pending');
      await http(engine, 'POST', `/tasks/${plain.taskId}/cancel?compensate=false`);
      await http(engine, 'POST', `/tasks/${byBody.taskId}/cancel`, { body: { compensate: true } });
      await http(engine, 'POST', `/tasks/${byQuery.taskId}/cancel?compensate=true`);
      const undone = async (taskId: string) => (await http(engine, 'GET', `/tasks/${taskId}/steps`)).body[0].compensatedAt !== null;
      expect([await undone(plain.taskId), await undone(byBody.taskId), await undone(byQuery.taskId)]).toEqual([false, true, true]);

      const bad = await http(engine, 'POST', `/tasks/${MISSING_ID}/cancel?compensate=maybe`);
      expect(bad.status).toBe(400);
      expect(bad.body.message).toMatch(/compensate must be a boolean/);
    });
  });

  describe('dead letters', () => {
    it('GET /dead-letters lists them by taskId; POST /dead-letters/:id/retry runs the compensation again', async () => {
      const seeded = await seedDeadLetter(bed.db.client);
      const listed = await http(engine, 'GET', `/dead-letters?taskId=${seeded.taskId}&limit=10`);
      expect(listed.status).toBe(200);
      expect(listed.body).toEqual({
        items: [expect.objectContaining({ id: seeded.deadLetterId, taskId: seeded.taskId, stepId: seeded.stepId })],
        nextCursor: null,
      });

      const retried = await http(engine, 'POST', `/dead-letters/${seeded.deadLetterId}/retry`);
      expect(retried.status).toBe(200);
      expect(retried.body).toMatchObject({ outcome: 'compensated', task: { id: seeded.taskId, status: 'rolled_back' }, deadLetter: null });
    });

    it('answers 404 for an unknown dead letter, 409 when its compensation is not registered, 400 for a bad taskId', async () => {
      const unknown = await http(engine, 'POST', `/dead-letters/${MISSING_ID}/retry`);
      expect(unknown.status).toBe(404);
      expect(unknown.body.code).toBe('DEAD_LETTER_NOT_FOUND');
      const orphan = await seedDeadLetter(bed.db.client, 'booking.compensations.gone');
      const conflict = await http(engine, 'POST', `/dead-letters/${orphan.deadLetterId}/retry`);
      expect(conflict.status).toBe(409);
      expect(conflict.body.message).toMatch(/booking\.compensations\.gone/);
      const bad = await http(engine, 'GET', '/dead-letters?taskId=nope');
      expect(bad.status).toBe(400);
      expect(bad.body.message).toMatch(/taskId must be a UUID/);
    });
  });

  describe('malformed and oversized requests', () => {
    /** What the engine writes to stdout and stderr while `run` runs (Nest's logger writes there). */
    async function logsDuring(run: () => Promise<void>): Promise<string> {
      const written: string[] = [];
      const spies = [process.stdout, process.stderr].map((stream) =>
        jest.spyOn(stream, 'write').mockImplementation((chunk: string | Uint8Array) => {
          written.push(String(chunk));
          return true;
        }),
      );
      try {
        await run();
      } finally {
        for (const spy of spies) spy.mockRestore();
      }
      return written.join('');
    }

    it('answers 400 INVALID_CURSOR to a tampered cursor whose time overflows, on /tasks and /dead-letters', async () => {
      const cursor = Buffer.from(`9999999999999999999:${randomUUID()}`).toString('base64url');
      for (const path of [`/tasks?cursor=${cursor}`, `/dead-letters?cursor=${cursor}`]) {
        const response = await http(engine, 'GET', path);
        expect([path, response.status]).toEqual([path, 400]);
        expect(response.body).toMatchObject({ code: 'INVALID_CURSOR', message: expect.stringMatching(/Invalid list cursor/) });
      }
    });

    it('answers 400 to a body nested 3,000 and 5,000 levels deep, before anything recurses into it, logging nothing', async () => {
      const before = await bed.rows.count('agent_tasks');
      const responses: Array<{ status: number; body: any }> = [];
      const logs = await logsDuring(async () => {
        for (const depth of [3_000, 5_000]) {
          const arrays = '['.repeat(depth) + ']'.repeat(depth);
          const objects = '{"a":'.repeat(depth) + '{}' + '}'.repeat(depth);
          for (const input of [arrays, objects]) {
            const response = await fetch(`${engine.httpUrl}/tasks`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: `{"workflowName":"booking","input":${input}}`,
            });
            responses.push({ status: response.status, body: await response.json() });
          }
        }
      });

      for (const response of responses) {
        expect(response).toEqual({
          status: 400,
          body: {
            statusCode: 400,
            code: 'INVALID_REQUEST',
            message: 'Invalid request: input must not nest objects and arrays deeper than 100 levels.',
            details: {
              violations: [
                { property: 'input', constraints: { maxDepth: 'input must not nest objects and arrays deeper than 100 levels' } },
              ],
            },
          },
        });
      }
      expect(logs).toBe('');
      expect(await bed.rows.count('agent_tasks')).toBe(before);
    });

    it('takes an input exactly 100 levels deep, as the library does', async () => {
      const input = { ...BOOKING, notes: JSON.parse('['.repeat(99) + ']'.repeat(99)) };
      const created = await http(engine, 'POST', '/tasks', { body: { workflowName: 'booking', input } });
      expect(created.status).toBe(201);
      // Past the depth check, the booking DTO strips the property it does not declare.
      expect(created.body.input).toEqual(BOOKING);
      const tooDeep = await http(engine, 'POST', '/tasks', {
        body: { workflowName: 'booking', input: { ...input, notes: [input.notes] } },
      });
      expect(tooDeep.status).toBe(400);
    });

    it('answers 409 to the retry of a dead letter whose compensation_fn names another workflow’s undo, and runs nothing', async () => {
      const refunds = jest.spyOn(engine.app.get(OrderGateway), 'refund');
      const tampered = await seedDeadLetter(bed.db.client, 'order-processing.refundCard');

      const response = await http(engine, 'POST', `/dead-letters/${tampered.deadLetterId}/retry`);

      expect(response.status).toBe(409);
      expect(response.body).toMatchObject({
        code: 'COMPENSATION_NOT_REGISTERED',
        message: expect.stringMatching(/"order-processing\.refundCard" of step "book-flight" of workflow "booking" is not registered/),
      });
      expect(refunds).not.toHaveBeenCalled();
      refunds.mockRestore();
    });

    it('keeps GET /tasks?limit=1000 within 2 MiB over tasks of a megabyte each, and pages through all of them', async () => {
      const ids = await seedLargeTasks(bed.db.client, 'bulk-export', 6, 500_000);

      const listed: string[] = [];
      let cursor = '';
      do {
        const page = await http(engine, 'GET', `/tasks?workflowName=bulk-export&limit=1000${cursor && `&cursor=${cursor}`}`);
        expect(page.status).toBe(200);
        expect(Buffer.byteLength(JSON.stringify(page.body))).toBeLessThanOrEqual(2 * 1024 * 1024);
        listed.push(...page.body.items.map((task: any) => task.id));
        cursor = page.body.nextCursor ?? '';
      } while (cursor && listed.length <= ids.length);
      expect(listed).toEqual(ids);
    });
  });

  it('configures the library from the environment: no Redis, the intervals, the reaper scheduled once', () => {
    const options = engine.app.get<DuraflowModuleOptions>(DURAFLOW_MODULE_OPTIONS);
    expect(options.redis).toBeUndefined();
    expect(options).toMatchObject({
      worker: { enabled: true, concurrency: 100, pollIntervalMs: 50 },
      heartbeatIntervalMs: 200,
      reaper: { intervalMs: 10_000, staleAfterMs: 30_000 },
    });
    expect(engine.app.get(SchedulerRegistry).getIntervals()).toEqual([REAPER_INTERVAL_NAME]);
  });

  it('GET /health reports the database, and no Redis without REDIS_URL', async () => {
    const response = await http(engine, 'GET', '/health');
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ status: 'ok', details: { database: { status: 'up' } } });
    expect(response.body.details.redis).toBeUndefined();
  });
});

describe('the engine HTTP API with DURAFLOW_API_KEY and REDIS_URL set', () => {
  let engine: RunningEngine;
  const KEY = 'http-secret';

  beforeAll(async () => {
    engine = await startTestEngine(bed, { DURAFLOW_API_KEY: KEY, REDIS_URL: SHARED_REDIS_URL });
  });
  afterAll(() => bed.close(engine));

  const routes: Array<[string, string, object?]> = [
    ['POST', '/tasks', { workflowName: 'booking', input: BOOKING }],
    ['GET', '/tasks'],
    ['GET', `/tasks/${MISSING_ID}`],
    ['GET', `/tasks/${MISSING_ID}/steps`],
    ['POST', `/tasks/${MISSING_ID}/cancel`],
    ['GET', '/dead-letters'],
    ['POST', `/dead-letters/${MISSING_ID}/retry`],
  ];

  it('answers 401 to every API call without the key or with a wrong one', async () => {
    for (const [method, path, body] of routes) {
      const attempts: Array<Record<string, string>> = [
        {},
        { 'x-api-key': 'guess' },
        { authorization: 'Bearer guess' },
        { authorization: KEY },
      ];
      for (const headers of attempts) {
        const response = await http(engine, method, path, { body, headers });
        expect([method, path, response.status]).toEqual([method, path, 401]);
        expect(response.body.message).toMatch(/Missing or wrong API key/);
      }
    }
  });

  it('serves calls with the key in x-api-key or as a Bearer token', async () => {
    const created = await http(engine, 'POST', '/tasks', {
      body: { workflowName: 'booking', input: BOOKING },
      headers: { 'x-api-key': KEY },
    });
    expect(created.status).toBe(201);
    const fetched = await http(engine, 'GET', `/tasks/${created.body.id}`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(fetched).toMatchObject({ status: 200, body: { id: created.body.id } });
    expect((await http(engine, 'GET', `/tasks/${MISSING_ID}`, { headers: { 'x-api-key': KEY } })).status).toBe(404);
  });

  it('gives the library REDIS_URL for its leader election', () => {
    expect(engine.app.get<DuraflowModuleOptions>(DURAFLOW_MODULE_OPTIONS).redis).toEqual({ url: SHARED_REDIS_URL });
  });

  it('leaves GET /health open, and reports Redis there', async () => {
    const response = await http(engine, 'GET', '/health');
    expect(response.status).toBe(200);
    expect(response.body.details).toEqual({ database: { status: 'up' }, redis: { status: 'up' } });
  });
});

describe('GET /health while Redis is down', () => {
  it('answers 503 with Redis down and the database up; only a caller with the API key sees why', async () => {
    const redis = bed.closeLater(await RedisServer.start(), (server) => server.teardown());
    const engine = await startTestEngine(bed, { REDIS_URL: redis.url, DURAFLOW_API_KEY: 'health-secret' });
    expect((await http(engine, 'GET', '/health')).status).toBe(200);
    await redis.stop();
    const response = await http(engine, 'GET', '/health');
    expect(response.body).toEqual({
      statusCode: 503,
      code: 'UNHEALTHY',
      message: 'Unhealthy: redis is down.',
      details: { database: { status: 'up' }, redis: { status: 'down' } },
    });
    for (const headers of [{ 'x-api-key': 'guess' }, { authorization: 'Bearer guess' }] as Array<Record<string, string>>) {
      expect((await http(engine, 'GET', '/health', { headers })).body.details.redis).toEqual({ status: 'down' });
    }
    const keyed = await http(engine, 'GET', '/health', { headers: { 'x-api-key': 'health-secret' } });
    expect(keyed.status).toBe(503);
    expect(keyed.body.details.redis).toEqual({ status: 'down', message: expect.any(String) });
  });
});

describe('a worker-only node (DURAFLOW_HTTP=false) and a submit-only node (DURAFLOW_WORKER=false)', () => {
  it('share the work: the submit-only node takes the task over HTTP, the worker-only node runs it', async () => {
    const worker = await startTestEngine(bed, { DURAFLOW_HTTP: 'false' });
    const submitter = await startTestEngine(bed, { DURAFLOW_WORKER: 'false' });
    expect(worker.httpUrl).toBeUndefined();
    expect(worker.grpcAddress).toBeUndefined();
    const created = await http(submitter, 'POST', '/tasks', { body: { workflowName: 'order-processing', input: { orderId: 'split' } } });
    const done = await eventually(
      'the worker engine completed the task',
      async () => (await http(submitter, 'GET', `/tasks/${created.body.id}`)).body,
      {
        until: (task) => task.status === 'completed',
      },
    );
    expect(done.workerId).toBe(worker.app.get(WorkerService).workerId);
    expect(submitter.app.get(WorkerService).stats().claimed).toBe(0);
  });
});

describe('where the API listens (HOST)', () => {
  async function listening(env: Record<string, string>) {
    const logs = new CapturedLogs();
    const engine = await startTestEngine(bed, { DURAFLOW_WORKER: 'false', ...env }, { logger: logs });
    const { address, port } = (engine.app as INestApplication).getHttpServer().address() as AddressInfo;
    const line = logs.lines.find((l) => l.includes('Duraflow engine listening'));
    const warned = logs.lines.some((l) => /^WARN \[Engine\] HOST=.* reachable from other machines and DURAFLOW_API_KEY is not set/.test(l));
    return { address, line, warned, port, grpcPort: engine.config.grpcPort };
  }

  it('binds to 127.0.0.1 by default without an API key, and says so', async () => {
    const { address, port, grpcPort, line, warned } = await listening({ HOST: '' });
    expect(address).toBe('127.0.0.1');
    expect(line).toContain(`Duraflow engine listening: HTTP http://127.0.0.1:${port}, gRPC 127.0.0.1:${grpcPort}`);
    expect(warned).toBe(false);
  });

  it('binds to every interface by default with an API key, and prints the address really bound', async () => {
    const { address, port, line, warned } = await listening({ HOST: '', DURAFLOW_API_KEY: 'k' });
    expect(address).toBe('0.0.0.0');
    expect(line).toContain(`HTTP http://0.0.0.0:${port}`);
    expect(warned).toBe(false);
  });

  it('binds where HOST says, and warns when that is beyond this machine without an API key', async () => {
    const { address, port, line, warned } = await listening({ HOST: '0.0.0.0' });
    expect([address, warned]).toEqual(['0.0.0.0', true]);
    expect(line).toContain(`HTTP http://0.0.0.0:${port}`);
  });
});
