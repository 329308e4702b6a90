import { IsInt, IsString } from 'class-validator';
import { DataSource } from 'typeorm';
import { TestingModule } from '@nestjs/testing';
import {
  InvalidEventNameError,
  InvalidEventSubscriptionError,
  InvalidPublishError,
  NotSerializableError,
  PayloadCodec,
  TaskStatus,
  Workflow,
  workflow,
  WorkflowContext,
  WorkflowService,
} from '@duraflow/nestjs';
import { EventRetention } from '../libs/duraflow/src/events/event-retention';
import { leakySaga } from './fixtures/events/events-test-parts';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/**
 * workflows.publish and duraflow_publish: one task per subscribing workflow per event, committed
 * with the publisher's transaction; refusals recorded; events kept without subscribers; Duraflow's
 * own events for a workflow that subscribes to them (docs/events.md).
 */

class OrderInput {
  @IsString()
  orderId!: string;
}

class StrictOrderInput {
  @IsInt()
  orderId!: number;
}

const ran: Array<{ workflow: string; input: unknown }> = [];

@Workflow('fulfil', { on: 'order.created', input: OrderInput })
class FulfilWorkflow {
  async run(ctx: WorkflowContext<OrderInput>) {
    ran.push({ workflow: 'fulfil', input: ctx.input });
    return { fulfilled: ctx.input.orderId };
  }
}

const audit = workflow(
  'audit',
  async (ctx) => {
    ran.push({ workflow: 'audit', input: ctx.input });
  },
  { on: ['order.created', 'order.cancelled'] },
);
const strict = workflow('strict', async () => 'never', { on: 'order.created', input: StrictOrderInput });
const boom = workflow('boom', async () => {
  throw new Error('boom');
});
const parked = workflow('parked', async () => 'later');
const alert = workflow(
  'alert',
  async (ctx) => {
    ran.push({ workflow: 'alert', input: ctx.input });
  },
  { on: ['duraflow.task.failed', 'duraflow.task.cancelled', 'duraflow.dead_letter.created'] },
);
const leaky = leakySaga('leaky');

describe('publish: events that start workflows', () => {
  const bed = useTestBed();
  let app: TestingModule;
  let workflows: WorkflowService;

  beforeAll(async () => {
    app = await bed.start({
      duraflow: { workflows: [audit, strict, boom, parked, alert, leaky], maxRetries: 0 },
      providers: [FulfilWorkflow],
    });
    workflows = app.get(WorkflowService);
  });

  beforeEach(() => (ran.length = 0));

  async function tasksOf(eventId: string) {
    const { rows } = await bed.db.client.query(
      `SELECT d.workflow_name, d.task_id, d.refusal, t.input, t.status FROM duraflow_event_deliveries d
       LEFT JOIN agent_tasks t ON t.id = d.task_id WHERE d.event_id = $1 ORDER BY d.workflow_name`,
      [eventId],
    );
    return rows;
  }

  it('starts one task per subscribing workflow with the payload as input, and records the refusal of a DTO that does not take it', async () => {
    const result = await workflows.publish('order.created', { orderId: 'o-1' });
    expect(result.created).toBe(true);
    expect(result.deliveries.map((d) => [d.workflowName, d.taskId !== null, d.refusal?.code ?? null])).toEqual([
      ['audit', true, null],
      ['fulfil', true, null],
      ['strict', false, 'INVALID_INPUT'],
    ]);
    const fulfil = result.deliveries.find((d) => d.workflowName === 'fulfil')!;
    const done = await workflows.waitFor(fulfil.taskId!, { timeoutMs: 20_000 });
    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(done.output).toEqual({ fulfilled: 'o-1' });
    const rows = await tasksOf(result.eventId);
    expect(rows.map((r) => [r.workflow_name, r.input])).toEqual([
      ['audit', { orderId: 'o-1' }],
      ['fulfil', { orderId: 'o-1' }],
      ['strict', null],
    ]);
    expect(rows[2].refusal.code).toBe('INVALID_INPUT');
    const [listed] = await workflows.listEvents({ name: 'order.created', limit: 1 });
    expect(listed.id).toBe(result.eventId);
    expect(listed.payload).toEqual({ orderId: 'o-1' });
    expect(listed.deliveries.find((d) => d.workflowName === 'strict')!.refusal!.message).toContain('orderId');
  });

  it('starts nothing and records nothing when the caller rolls back the transaction it published in', async () => {
    const before = await bed.rows.count('agent_tasks');
    await expect(
      app.get(DataSource).transaction(async (manager) => {
        await workflows.publish('order.created', { orderId: 'rolled-back' }, { manager });
        throw new Error('the order was not saved');
      }),
    ).rejects.toThrow('the order was not saved');
    const { rows } = await bed.db.client.query(
      `SELECT count(*)::int AS n FROM duraflow_published_events WHERE payload->>'orderId' = 'rolled-back'`,
    );
    expect(rows[0].n).toBe(0);
    expect(await bed.rows.count('agent_tasks')).toBe(before);
  });

  it('starts the tasks with the transaction it published in once that commits', async () => {
    const result = await app.get(DataSource).transaction((manager) => workflows.publish('order.created', { orderId: 'o-tx' }, { manager }));
    const fulfil = result.deliveries.find((d) => d.workflowName === 'fulfil')!;
    expect((await workflows.waitFor(fulfil.taskId!, { timeoutMs: 20_000 })).output).toEqual({ fulfilled: 'o-tx' });
  });

  it('records one event for one idempotency key, however often it is published', async () => {
    const first = await workflows.publish('order.cancelled', { orderId: 'o-2' }, { idempotencyKey: 'cancel:o-2' });
    const again = await workflows.publish('order.cancelled', { orderId: 'o-2' }, { idempotencyKey: 'cancel:o-2' });
    expect(again).toEqual({ ...first, created: false });
    const { rows } = await bed.db.client.query(
      `SELECT count(*)::int AS n FROM duraflow_published_events WHERE idempotency_key = 'cancel:o-2'`,
    );
    expect(rows[0].n).toBe(1);
    const tasks = await bed.db.client.query(
      `SELECT count(*)::int AS n FROM agent_tasks WHERE workflow_name = 'audit' AND input->>'orderId' = 'o-2'`,
    );
    expect(tasks.rows[0].n).toBe(1);
  });

  it('keeps an event no workflow subscribes to, and lists it', async () => {
    const result = await workflows.publish('nobody.listens', { hello: 'world' });
    expect(result.deliveries).toEqual([]);
    const listed = await workflows.listEvents({ name: 'nobody.listens' });
    expect(listed.map((e) => [e.id, e.payload, e.deliveries])).toEqual([[result.eventId, { hello: 'world' }, []]]);
  });

  it('deletes the events past their retention with their deliveries, and keeps the newer ones', async () => {
    const old = await workflows.publish('order.cancelled', { orderId: 'o-old' });
    const recent = await workflows.publish('order.cancelled', { orderId: 'o-recent' });
    await bed.db.client.query(`UPDATE duraflow_published_events SET created_at = now() - interval '8 days' WHERE id = $1`, [old.eventId]);
    expect(await app.get(EventRetention).deleteExpired()).toBe(1);
    const { rows } = await bed.db.client.query(
      `SELECT e.id, count(d.*)::int AS deliveries FROM duraflow_published_events e LEFT JOIN duraflow_event_deliveries d ON d.event_id = e.id
       WHERE e.id = ANY($1::uuid[]) GROUP BY e.id`,
      [[old.eventId, recent.eventId]],
    );
    expect(rows).toEqual([{ id: recent.eventId, deliveries: 1 }]);
    const orphans = await bed.db.client.query(`SELECT count(*)::int AS n FROM duraflow_event_deliveries WHERE event_id = $1`, [
      old.eventId,
    ]);
    expect(orphans.rows[0].n).toBe(0);
  });

  it('refuses a bad name, a name of Duraflow, a payload that is not JSON and a bad key, writing nothing', async () => {
    const countEvents = async () => (await bed.db.client.query(`SELECT count(*)::int AS n FROM duraflow_published_events`)).rows[0].n;
    const before = await countEvents();
    await expect(workflows.publish('has space', {})).rejects.toBeInstanceOf(InvalidEventNameError);
    await expect(workflows.publish('duraflow.task.failed', {})).rejects.toBeInstanceOf(InvalidEventNameError);
    await expect(workflows.publish('order.created', { n: 10n })).rejects.toBeInstanceOf(NotSerializableError);
    await expect(workflows.publish('order.created', {}, { idempotencyKey: '' })).rejects.toBeInstanceOf(InvalidPublishError);
    expect(await countEvents()).toBe(before);
  });

  it('publishes from a trigger on a table of the application: nothing when its transaction rolls back, the tasks when it commits', async () => {
    await bed.db.client.query(`CREATE TABLE shop_orders (id TEXT PRIMARY KEY)`);
    await bed.db.client.query(`
      CREATE FUNCTION shop_order_created() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM duraflow_publish('order.created', jsonb_build_object('orderId', NEW.id), 'shop-order:' || NEW.id);
        RETURN NEW;
      END $$`);
    await bed.db.client.query(
      `CREATE TRIGGER shop_order_created AFTER INSERT ON shop_orders FOR EACH ROW EXECUTE FUNCTION shop_order_created()`,
    );

    await bed.db.client.query('BEGIN');
    await bed.db.client.query(`INSERT INTO shop_orders VALUES ('sql-rolled-back')`);
    await bed.db.client.query('ROLLBACK');
    await bed.db.client.query(`INSERT INTO shop_orders VALUES ('sql-1')`);

    await eventually('the fulfilment of sql-1 ran', () =>
      ran.some((r) => r.workflow === 'fulfil' && (r.input as OrderInput).orderId === 'sql-1'),
    );
    const { rows } = await bed.db.client.query(
      `SELECT payload->>'orderId' AS order_id FROM duraflow_published_events WHERE idempotency_key LIKE 'shop-order:%'`,
    );
    expect(rows.map((r) => r.order_id)).toEqual(['sql-1']);
    const started = await bed.db.client.query(`SELECT count(*)::int AS n FROM agent_tasks WHERE input->>'orderId' = 'sql-rolled-back'`);
    expect(started.rows[0].n).toBe(0);
  });

  it("starts a workflow subscribed to Duraflow's own events when a task fails or is cancelled, and publishes none nobody subscribes to", async () => {
    const failed = await workflows.submit('boom', {});
    const cancelled = await workflows.submit('parked', {}, { scheduledAt: new Date(Date.now() + 3_600_000) });
    await workflows.cancel(cancelled.id);
    await eventually('the alert workflow ran twice', () => ran.filter((r) => r.workflow === 'alert').length === 2);
    const alerts = ran.filter((r) => r.workflow === 'alert').map((r) => r.input as Record<string, unknown>);
    expect(alerts.map((a) => [a.taskId, a.workflowName, a.status]).sort()).toEqual(
      [
        [failed.id, 'boom', 'failed'],
        [cancelled.id, 'parked', 'cancelled'],
      ].sort(),
    );
    // The alert tasks completed, and nobody subscribes to completions: no such event was recorded.
    const { rows } = await bed.db.client.query(
      `SELECT count(*)::int AS n FROM duraflow_published_events WHERE name = 'duraflow.task.completed'`,
    );
    expect(rows[0].n).toBe(0);
  });
  it('starts a workflow subscribed to duraflow.dead_letter.created when a compensation fails for good', async () => {
    const task = await workflows.submit('leaky', {});
    await eventually('the alert for the dead letter ran', () =>
      ran.some((r) => r.workflow === 'alert' && (r.input as Record<string, unknown>).deadLetterId !== undefined),
    );
    const alert = ran.find((r) => r.workflow === 'alert' && (r.input as Record<string, unknown>).deadLetterId !== undefined)!;
    expect(alert.input).toMatchObject({ taskId: task.id, stepKey: 'charge', workflowName: 'leaky' });
  });
  it('refuses to boot with a subscription that is wrong, saying what to fix', async () => {
    const both = workflow('both', async () => undefined, {
      on: 'x.happened',
      debounce: { key: 'id', periodMs: 1_000 },
      batch: { maxSize: 10, timeoutMs: 1_000 },
    });
    const unknownOwn = workflow('unknown-own', async () => undefined, { on: 'duraflow.task.exploded' });
    const badSize = workflow('bad-size', async () => undefined, { on: 'x.happened', batch: { maxSize: 0, timeoutMs: 1_000 } });
    for (const [definition, reason] of [
      [both, /not both/],
      [unknownOwn, /not one of Duraflow's own events/],
      [badSize, /batch\.maxSize/],
    ] as const) {
      const error = await bed.bootFailure({ duraflow: { workflows: [definition] } });
      expect(error).toBeInstanceOf(InvalidEventSubscriptionError);
      expect((error as Error).message).toMatch(reason);
    }
  });
});

/** A codec that wraps each payload with the context it was encoded for, and refuses another context. */
const wrappingCodec: PayloadCodec = {
  name: 'test-wrap',
  encode: (value, context) => ({ wrapped: Buffer.from(JSON.stringify([context.taskId, context.field, value])).toString('base64') }),
  decode: (stored, context) => {
    if (stored === null || typeof stored !== 'object' || !('wrapped' in stored)) return stored;
    const [taskId, field, value] = JSON.parse(Buffer.from(String(stored.wrapped), 'base64').toString());
    if (taskId !== context.taskId || field !== context.field) throw new Error('encoded for another task or field');
    return value;
  },
};

const secretRuns: unknown[] = [];
const secretDebounced = workflow('secret-reindex', async (ctx) => void secretRuns.push(ctx.input), {
  on: 'secret.changed',
  debounce: { key: 'docId', periodMs: 100 },
});
const secretBatched = workflow('secret-digest', async (ctx) => void secretRuns.push(ctx.input), {
  on: 'secret.changed',
  batch: { maxSize: 2, timeoutMs: 60_000 },
});

describe('publish with a codec', () => {
  const bed = useTestBed();

  it('stores the payload encoded, and the debounce and batch tasks get it decoded', async () => {
    const app = await bed.start({
      duraflow: { codec: wrappingCodec, workflows: [secretDebounced, secretBatched], events: { groupPollIntervalMs: 20 } },
    });
    const workflows = app.get(WorkflowService);
    const first = await workflows.publish('secret.changed', { docId: 'd', secret: 's3cr3t-1' });
    await workflows.publish('secret.changed', { docId: 'd', secret: 's3cr3t-2' });
    const { rows } = await bed.db.client.query(`SELECT payload::text AS text FROM duraflow_published_events`);
    expect(rows).toHaveLength(2);
    for (const row of rows) expect(row.text).not.toContain('s3cr3t');
    expect((await workflows.listEvents({ limit: 2 })).map((event) => event.payload)).toEqual([
      { docId: 'd', secret: 's3cr3t-2' },
      { docId: 'd', secret: 's3cr3t-1' },
    ]);
    await eventually('the debounce and the batch ran', () => secretRuns.length === 2);
    expect(secretRuns).toContainEqual({ docId: 'd', secret: 's3cr3t-2' });
    const batch = secretRuns.find((input) => (input as { events?: unknown }).events) as { events: Array<{ id: string; payload: unknown }> };
    expect(batch.events.map((event) => event.payload)).toEqual([
      { docId: 'd', secret: 's3cr3t-1' },
      { docId: 'd', secret: 's3cr3t-2' },
    ]);
    expect(batch.events[0].id).toBe(first.eventId);
  });
});
