import { status } from '@grpc/grpc-js';
import { createDuraflowClient, DuraflowClient, grpcError } from './fixtures/engine/grpc-client';
import { http, startTestEngine } from './fixtures/engine/engine-app';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';
import { RunningEngine } from '../src/engine';

/** The engine's APIs of events that start workflows: HTTP POST /events/:name and gRPC PublishEvent (docs/engine.md). */
describe('the engine publishes events (HTTP and gRPC)', () => {
  const bed = useTestBed();
  let engine: RunningEngine;
  let client: DuraflowClient;

  beforeAll(async () => {
    engine = await startTestEngine(bed);
    client = bed.closeLater(createDuraflowClient(engine.grpcAddress!), async (opened) => opened.close());
  });

  const completed = (id: string) =>
    eventually(`task ${id} completed`, async () => (await http(engine, 'GET', `/tasks/${id}`)).body, {
      until: (task) => task.status === 'completed',
    });

  it('POST /events/:name answers 201 with the task each subscribing workflow got, 200 with the same event for the same key', async () => {
    const published = await http(engine, 'POST', '/events/order.placed', {
      body: { payload: { orderId: 'h-1' }, idempotencyKey: 'placed:h-1' },
    });
    expect(published.status).toBe(201);
    expect(published.body).toMatchObject({ created: true, deliveries: [{ workflowName: 'order-placed-notice', refusal: null }] });
    const task = await completed(published.body.deliveries[0].taskId);
    expect(task.output).toEqual({ noticed: 'h-1' });

    const again = await http(engine, 'POST', '/events/order.placed', {
      body: { payload: { orderId: 'h-1' }, idempotencyKey: 'placed:h-1' },
    });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ ...published.body, created: false });

    const listed = await http(engine, 'GET', '/events?name=order.placed');
    expect(listed.body.map((event: any) => [event.id, event.payload])).toEqual([[published.body.eventId, { orderId: 'h-1' }]]);
  });

  it("records a payload the workflow refuses as that delivery's refusal, and answers 400 for a bad name", async () => {
    const refused = await http(engine, 'POST', '/events/order.placed', { body: { payload: { orderId: 7 } } });
    expect(refused.status).toBe(201);
    expect(refused.body.deliveries).toEqual([
      { workflowName: 'order-placed-notice', taskId: null, groupId: null, refusal: expect.objectContaining({ code: 'INVALID_INPUT' }) },
    ]);
    const bad = await http(engine, 'POST', '/events/duraflow.task.failed', { body: {} });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('INVALID_EVENT_NAME');
  });

  it('PublishEvent starts the subscribing workflow and answers with its deliveries; INVALID_ARGUMENT for a bad payload', async () => {
    const response = await client.PublishEvent({ name: 'order.placed', payload: JSON.stringify({ orderId: 'g-1' }) });
    expect(response).toMatchObject({ created: true, deliveries: [{ workflow_name: 'order-placed-notice', refusal_code: '' }] });
    expect((await completed(response.deliveries[0].task_id)).output).toEqual({ noticed: 'g-1' });
    await expect(client.PublishEvent({ name: 'order.placed', payload: '{not json' })).rejects.toEqual(grpcError(status.INVALID_ARGUMENT));
  });
});
