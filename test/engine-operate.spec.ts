import { status } from '@grpc/grpc-js';
import { createDuraflowClient, DuraflowClient, grpcError } from './fixtures/engine/grpc-client';
import { http, startTestEngine } from './fixtures/engine/engine-app';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';
import { RunningEngine } from '../src/engine';

/** The engine's operator routes and RPCs: retry, fork and the bulk actions, over HTTP and gRPC. */

const MISSING_ID = '00000000-0000-4000-8000-000000000000';
const LATER = () => new Date(Date.now() + 3_600_000).toISOString();
const BOOKING = { customer: 'ada', from: 'AMS', to: 'LIS' };

const bed = useTestBed();
let engine: RunningEngine;
let client: DuraflowClient;

beforeAll(async () => {
  engine = await startTestEngine(bed);
  client = bed.closeLater(createDuraflowClient(engine.grpcAddress!), async (opened) => opened.close());
});

const getTask = async (id: string) => (await http(engine, 'GET', `/tasks/${id}`)).body;
const stepsOf = async (id: string) => (await http(engine, 'GET', `/tasks/${id}/steps`)).body as Array<{ stepKey: string; attempt: number }>;
const ended = (id: string) =>
  eventually(`task ${id} has ended`, () => getTask(id), { until: (task) => !['pending', 'running'].includes(task.status) });

/** An approval task waiting for its signal (its `record-request` step done), then cancelled without compensation. */
async function cancelledApproval(): Promise<string> {
  const { body } = await http(engine, 'POST', '/tasks', { body: { workflowName: 'approval', input: { request: 'laptop' } } });
  await eventually('its request recorded', () => stepsOf(body.id), { until: (steps) => steps.some((s) => s.stepKey === 'record-request') });
  expect((await http(engine, 'POST', `/tasks/${body.id}/cancel`)).body.status).toBe('cancelled');
  return body.id;
}

async function completedBooking(): Promise<string> {
  const { body } = await http(engine, 'POST', '/tasks', { body: { workflowName: 'booking', input: BOOKING } });
  expect((await ended(body.id)).status).toBe('completed');
  return body.id;
}

/** `count` pending tasks of `order-processing`, an hour ahead; the time just before they were made. */
async function pendingOrders(count: number): Promise<{ ids: string[]; since: string }> {
  const since = new Date(Date.now() - 1).toISOString();
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const body = { workflowName: 'order-processing', input: { orderId: `o${i}` }, scheduledAt: LATER() };
    ids.push((await http(engine, 'POST', '/tasks', { body })).body.id);
  }
  return { ids, since };
}

describe('POST /tasks/:id/retry', () => {
  it('runs a cancelled task again from where it stopped: 200, its completed step is not run again', async () => {
    const id = await cancelledApproval();
    const retried = await http(engine, 'POST', `/tasks/${id}/retry`);
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ id, status: expect.stringMatching(/^(pending|running)$/) });
    expect(retried.body.history).toEqual([expect.objectContaining({ kind: 'retried', fromStatus: 'cancelled' })]);

    await eventually('the retried run waits for its signal again', () => getTask(id), { until: (task) => task.status !== 'cancelled' });
    await eventually(
      'the signal is taken',
      async () => (await http(engine, 'POST', `/tasks/${id}/signals/approval`, { body: { payload: { approved: true } } })).status === 201,
    );
    const done = await ended(id);
    expect(done).toMatchObject({ status: 'completed', output: { request: 'laptop', approved: true } });
    expect((await stepsOf(id)).filter((step) => step.stepKey === 'record-request')).toHaveLength(1);
  });

  it('answers 409 TASK_NOT_RETRYABLE for a task in another status, 404 for an unknown task, 400 for an id that is not a UUID', async () => {
    const id = await completedBooking();
    const refused = await http(engine, 'POST', `/tasks/${id}/retry`);
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ code: 'TASK_NOT_RETRYABLE', message: expect.stringContaining('completed') });
    expect((await getTask(id)).status).toBe('completed');

    expect((await http(engine, 'POST', `/tasks/${MISSING_ID}/retry`)).body.code).toBe('TASK_NOT_FOUND');
    expect((await http(engine, 'POST', `/tasks/${MISSING_ID}/retry`)).status).toBe(404);
    expect((await http(engine, 'POST', '/tasks/not-a-uuid/retry')).status).toBe(400);
  });
});

describe('POST /tasks/:id/fork', () => {
  it('answers 201 with a new task that keeps the steps before fromStep and runs the rest anew', async () => {
    const original = await completedBooking();
    const forked = await http(engine, 'POST', `/tasks/${original}/fork`, { body: { fromStep: 'book-hotel' } });
    expect(forked.status).toBe(201);
    expect(forked.body.id).not.toBe(original);
    expect(forked.body).toMatchObject({ workflowName: 'booking', input: BOOKING, copiedSteps: 1 });
    expect(forked.body.forkedFrom).toEqual({ taskId: original, fromStep: 'book-hotel' });

    const done = await ended(forked.body.id);
    expect(done.status).toBe('completed');
    expect(done.forkedFrom).toEqual({ taskId: original, fromStep: 'book-hotel' });
    expect((await stepsOf(forked.body.id)).map((step) => step.stepKey).sort()).toEqual(['book-car', 'book-flight', 'book-hotel']);
    expect((await getTask(original)).status).toBe('completed');
  });

  it('refuses a body without fromStep (400), an unknown step and an unknown task, and makes no task', async () => {
    const original = await completedBooking();
    const before = (await http(engine, 'GET', '/tasks?limit=1000')).body.items.length;
    const missing = await http(engine, 'POST', `/tasks/${original}/fork`, { body: {} });
    expect(missing.status).toBe(400);
    expect(missing.body.code).toBe('INVALID_REQUEST');
    const unknownStep = await http(engine, 'POST', `/tasks/${original}/fork`, { body: { fromStep: 'book-spaceship' } });
    expect([400, 404]).toContain(unknownStep.status);
    expect(unknownStep.body.message).toContain('book-spaceship');
    const unknownTask = await http(engine, 'POST', `/tasks/${MISSING_ID}/fork`, { body: { fromStep: 'book-hotel' } });
    expect(unknownTask).toMatchObject({ status: 404, body: { code: 'TASK_NOT_FOUND' } });
    expect((await http(engine, 'GET', '/tasks?limit=1000')).body.items.length).toBe(before);
  });
});

describe('bulk actions: POST /tasks/cancel, /tasks/retry, /tasks/resume', () => {
  it('counts without changing on a dry run, changes at most `limit`, and a second identical call changes nothing', async () => {
    const { ids, since } = await pendingOrders(3);
    const filter = { workflowName: 'order-processing', status: 'pending', createdAfter: since };

    const dry = await http(engine, 'POST', '/tasks/cancel', { body: { ...filter, dryRun: true } });
    expect(dry).toMatchObject({ status: 200, body: { matched: 3, changed: 0 } });
    for (const id of ids) expect((await getTask(id)).status).toBe('pending');

    expect((await http(engine, 'POST', '/tasks/cancel', { body: { ...filter, limit: 2 } })).body).toMatchObject({ changed: 2 });
    expect((await http(engine, 'POST', '/tasks/cancel', { body: filter })).body).toMatchObject({ changed: 1 });
    expect((await http(engine, 'POST', '/tasks/cancel', { body: filter })).body).toEqual({ matched: 0, changed: 0 });
    for (const id of ids) expect((await getTask(id)).status).toBe('cancelled');

    const retried = await http(engine, 'POST', '/tasks/retry', { body: { ...filter, status: ['cancelled'] } });
    expect(retried).toMatchObject({ status: 200, body: { matched: 3, changed: 3 } });
    for (const id of ids) expect((await getTask(id)).status).not.toBe('cancelled');

    const resumed = await http(engine, 'POST', '/tasks/resume', { body: { workflowName: 'order-processing', createdAfter: since } });
    expect(resumed).toMatchObject({ status: 200, body: { changed: 0 } });
  });

  it('refuses a bad status, an unknown property and a cross-site request with 4xx, changing nothing', async () => {
    const { ids, since } = await pendingOrders(1);
    const filter = { workflowName: 'order-processing', createdAfter: since };
    expect((await http(engine, 'POST', '/tasks/cancel', { body: { ...filter, status: 'sleeping' } })).status).toBe(400);
    expect((await http(engine, 'POST', '/tasks/cancel', { body: { ...filter, tenant: 'acme' } })).status).toBe(400);
    const crossSite = await http(engine, 'POST', '/tasks/cancel', { body: filter, headers: { 'sec-fetch-site': 'cross-site' } });
    expect(crossSite.status).toBe(403);
    expect((await getTask(ids[0])).status).toBe('pending');
  });

  it('refuses an empty filter unless `all` says so', async () => {
    const refused = await http(engine, 'POST', '/tasks/cancel', { body: { dryRun: true } });
    expect(refused.status).toBe(400);
    const all = await http(engine, 'POST', '/tasks/cancel', { body: { all: true, dryRun: true } });
    expect(all).toMatchObject({ status: 200, body: { changed: 0 } });
  });
});

describe('gRPC RetryTask, ForkTask, CancelTasks, RetryTasks, ResumeTasks', () => {
  it('retries a cancelled task, and answers FAILED_PRECONDITION for a completed one and NOT_FOUND for an unknown one', async () => {
    const id = await cancelledApproval();
    const retried = await client.RetryTask({ id });
    expect(retried).toMatchObject({ id, status: expect.stringMatching(/^TASK_STATUS_(PENDING|RUNNING)$/) });
    expect(JSON.parse(retried.history)).toEqual([expect.objectContaining({ kind: 'retried', fromStatus: 'cancelled' })]);
    await expect(client.RetryTask({ id: await completedBooking() })).rejects.toEqual(grpcError(status.FAILED_PRECONDITION, /completed/));
    await expect(client.RetryTask({ id: MISSING_ID })).rejects.toEqual(grpcError(status.NOT_FOUND));
    await expect(client.RetryTask({ id: 'nope' })).rejects.toEqual(grpcError(status.INVALID_ARGUMENT, /id must be a UUID/));
    await client.CancelTask({ id });
  });

  it('forks a completed task from a step into a new task that completes', async () => {
    const original = await completedBooking();
    const forked = await client.ForkTask({ id: original, from_step: 'book-car' });
    expect(forked.id).not.toBe(original);
    expect(forked).toMatchObject({ forked_from_task_id: original, forked_from_step: 'book-car', copied_steps: 2 });
    expect(JSON.parse(forked.input)).toEqual(BOOKING);
    expect((await ended(forked.id)).status).toBe('completed');
    await expect(client.ForkTask({ id: original, from_step: 'book-spaceship' })).rejects.toEqual(
      expect.objectContaining({ details: expect.stringContaining('book-spaceship') }),
    );
    await expect(client.ForkTask({ id: original, from_step: 'book-car', input: '{' })).rejects.toEqual(grpcError(status.INVALID_ARGUMENT));
  });

  it('cancels, retries and resumes by filter, with dry_run and limit', async () => {
    const { ids, since } = await pendingOrders(2);
    const filter = { workflow_name: 'order-processing', status: ['TASK_STATUS_PENDING'], created_after: since };
    expect(await client.CancelTasks({ filter, dry_run: true })).toEqual({ matched: 2, changed: 0 });
    expect(await client.CancelTasks({ filter, limit: 1 })).toMatchObject({ changed: 1 });
    expect(await client.CancelTasks({ filter })).toMatchObject({ changed: 1 });
    for (const id of ids) expect((await getTask(id)).status).toBe('cancelled');
    const cancelled = { ...filter, status: ['TASK_STATUS_CANCELLED'] };
    expect(await client.RetryTasks({ filter: cancelled })).toEqual({ matched: 2, changed: 2 });
    expect(await client.ResumeTasks({ filter: { workflow_name: 'order-processing', created_after: since } })).toMatchObject({ changed: 0 });
    await expect(client.CancelTasks({ filter: {}, dry_run: true })).rejects.toEqual(grpcError(status.INVALID_ARGUMENT));
  });
});
