import { TestingModule } from '@nestjs/testing';
import { workflow, WorkflowService } from '@duraflow/nestjs';
import { SUBMIT_ONLY, useTestBed } from './support/test-bed';

/**
 * duraflow_submit and duraflow_publish (migration 4000) write what their TypeScript twins write:
 * the rows of both paths are compared column by column, so the two cannot drift apart unnoticed.
 */

const plain = workflow('sql-plain', async () => undefined);
const versioned = workflow('sql-versioned', async () => undefined, { on: 'sql.compared', version: 2, maxRetries: 5 });
const debounced = workflow('sql-debounced', async () => undefined, {
  on: 'sql.compared',
  debounce: { key: 'docId', periodMs: 3_600_000 },
});
const batched = workflow('sql-batched', async () => undefined, { on: 'sql.compared', batch: { maxSize: 100, timeoutMs: 3_600_000 } });
const keyedInCode = workflow('sql-keyed-in-code', async () => undefined, {
  on: 'sql.keyed',
  debounce: { key: (payload: { docId: string }) => payload.docId, periodMs: 3_600_000 },
});

/** Every column but those each row has of its own (ids, times, the key the test gave it). */
const OWN_COLUMNS = new Set(['id', 'created_at', 'updated_at', 'idempotency_key', 'event_id', 'task_id', 'group_id']);

function comparable(row: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(row).filter(([column]) => !OWN_COLUMNS.has(column)));
}

describe('duraflow_submit and duraflow_publish: the SQL twins of submit and publish', () => {
  const bed = useTestBed();
  let app: TestingModule;
  let workflows: WorkflowService;

  beforeAll(async () => {
    // Submit-only: the tasks stay pending, as both paths wrote them.
    app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [plain, versioned, debounced, batched, keyedInCode] } });
    workflows = app.get(WorkflowService);
  });

  const sql = async (text: string, values: unknown[] = []) => (await bed.db.client.query(text, values)).rows;
  const task = async (id: string) => (await sql(`SELECT * FROM agent_tasks WHERE id = $1`, [id]))[0];

  it('writes the same task row as submit, every column but its own id, times and key', async () => {
    const input = { orderId: 7, lines: [{ sku: 'a', qty: 2 }], note: 'ünïcode' };
    const ts = await workflows.submit('sql-plain', input, { idempotencyKey: 'ts-1' });
    const [{ id }] = await sql(`SELECT duraflow_submit('sql-plain', $1::jsonb, 'sql-1') AS id`, [JSON.stringify(input)]);
    const [tsRow, sqlRow] = [await task(ts.id), await task(id)];
    expect(Object.keys(sqlRow).sort()).toEqual(Object.keys(tsRow).sort());
    expect(comparable(sqlRow)).toEqual(comparable(tsRow));
    expect([tsRow.idempotency_key, sqlRow.idempotency_key]).toEqual(['ts-1', 'sql-1']);
  });

  it('returns the same task for the same key, creating one', async () => {
    const [first] = await sql(`SELECT duraflow_submit('sql-plain', '{"n": 1}', 'sql-twice') AS id`);
    const [again] = await sql(`SELECT duraflow_submit('sql-plain', '{"n": 1}', 'sql-twice') AS id`);
    expect(again.id).toBe(first.id);
    expect(await bed.rows.count('agent_tasks', `idempotency_key = 'sql-twice'`)).toBe(1);
  });

  it('refuses a workflow name a submit refuses, writing nothing', async () => {
    await expect(sql(`SELECT duraflow_submit('has space', '{}')`)).rejects.toThrow(/workflow name/);
    await expect(sql(`SELECT duraflow_publish('has space', '{}')`)).rejects.toThrow(/event name/);
  });

  it('records the same event, deliveries and tasks as publish, and joins the same debounce and batch', async () => {
    const payload = { docId: 'd-1', size: 3 };
    const ts = await workflows.publish('sql.compared', payload, { idempotencyKey: 'ts-event' });
    const [{ id }] = await sql(`SELECT duraflow_publish('sql.compared', $1::jsonb, 'sql-event') AS id`, [JSON.stringify(payload)]);

    const events = await sql(`SELECT * FROM duraflow_published_events WHERE id = ANY($1::uuid[]) ORDER BY created_at`, [[ts.eventId, id]]);
    expect(comparable(events[1])).toEqual(comparable(events[0]));

    const deliveries = async (eventId: string) =>
      sql(`SELECT * FROM duraflow_event_deliveries WHERE event_id = $1 ORDER BY workflow_name`, [eventId]);
    const [tsDeliveries, sqlDeliveries] = [await deliveries(ts.eventId), await deliveries(id)];
    expect(sqlDeliveries.map(comparable)).toEqual(tsDeliveries.map(comparable));
    expect(sqlDeliveries.map((d) => [d.workflow_name, d.task_id !== null, d.group_id])).toEqual(
      tsDeliveries.map((d) => [d.workflow_name, d.task_id !== null, d.group_id]),
    );

    const tsTask = await task(tsDeliveries.find((d) => d.workflow_name === 'sql-versioned').task_id);
    const sqlTask = await task(sqlDeliveries.find((d) => d.workflow_name === 'sql-versioned').task_id);
    expect(comparable(sqlTask)).toEqual(comparable(tsTask));
    expect([sqlTask.workflow_version, sqlTask.max_retries, sqlTask.input]).toEqual([2, 5, payload]);

    const groups = await sql(`SELECT workflow_name, group_key, event_count FROM duraflow_event_groups ORDER BY workflow_name`);
    expect(groups).toEqual([
      { workflow_name: 'sql-batched', group_key: '', event_count: 2 },
      { workflow_name: 'sql-debounced', group_key: 'd-1', event_count: 2 },
    ]);
  });

  it('returns the same event for the same key, recording one', async () => {
    const [first] = await sql(`SELECT duraflow_publish('sql.once', '{}', 'k') AS id`);
    const [again] = await sql(`SELECT duraflow_publish('sql.once', '{}', 'k') AS id`);
    const ts = await workflows.publish('sql.once', {}, { idempotencyKey: 'k' });
    expect([again.id, ts.eventId, ts.created]).toEqual([first.id, first.id, false]);
  });

  it('refuses an object or an array in a key field alike from SQL and from publish, and still delivers to the others', async () => {
    for (const docId of [{ shard: 1 }, ['d', 1]]) {
      const payload = { docId, size: 1 };
      const ts = await workflows.publish('sql.compared', payload);
      const [{ id }] = await sql(`SELECT duraflow_publish('sql.compared', $1::jsonb) AS id`, [JSON.stringify(payload)]);
      const deliveries = async (eventId: string) =>
        sql(
          `SELECT workflow_name, task_id IS NOT NULL AS started, group_id IS NOT NULL AS grouped, refusal FROM duraflow_event_deliveries
             WHERE event_id = $1 ORDER BY workflow_name`,
          [eventId],
        );
      const [tsDeliveries, sqlDeliveries] = [await deliveries(ts.eventId), await deliveries(id)];
      expect(sqlDeliveries).toEqual(tsDeliveries);
      const kind = Array.isArray(docId) ? 'array' : 'object';
      expect(tsDeliveries.find((d) => d.workflow_name === 'sql-debounced')).toEqual({
        workflow_name: 'sql-debounced',
        started: false,
        grouped: false,
        refusal: {
          code: 'EVENT_KEY_NOT_SCALAR',
          message: `The debounce key field "docId" of workflow "sql-debounced" holds an ${kind}: a key field must hold a string, a number or a boolean.`,
        },
      });
      expect(tsDeliveries.filter((d) => d.refusal === null).map((d) => d.workflow_name)).toEqual(['sql-batched', 'sql-versioned']);
    }
  });

  it('records a publish from SQL to a debounce keyed by a function as refused for that workflow', async () => {
    const [{ id }] = await sql(`SELECT duraflow_publish('sql.keyed', '{"docId": "d-2"}') AS id`);
    const [delivery] = await sql(`SELECT workflow_name, task_id, group_id, refusal FROM duraflow_event_deliveries WHERE event_id = $1`, [
      id,
    ]);
    expect(delivery).toMatchObject({
      workflow_name: 'sql-keyed-in-code',
      task_id: null,
      group_id: null,
      refusal: { code: 'EVENT_KEY_IN_CODE' },
    });
    const ts = await workflows.publish('sql.keyed', { docId: 'd-2' });
    expect(ts.deliveries[0]).toMatchObject({ workflowName: 'sql-keyed-in-code', refusal: null });
    expect(ts.deliveries[0].groupId).not.toBeNull();
  });
});
