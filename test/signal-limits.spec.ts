import { randomUUID } from 'node:crypto';
import { createServer, Server, Socket } from 'node:net';
import { ScheduleModule } from '@nestjs/schedule';
import {
  DuraflowDashboardModule,
  DuraflowModuleOptions,
  InvalidCursorError,
  InvalidListOptionsError,
  ReaperService,
  SignalLimitExceededError,
  WorkflowContext,
  WorkflowService,
  workflow,
} from '@duraflow/nestjs';
import { createDuraflowClient } from './fixtures/engine/grpc-client';
import { http, startTestEngine } from './fixtures/engine/engine-app';
import { OPERATOR_HEADERS, OperatorGuard } from './fixtures/dashboard/dashboard-app';
import { SUBMIT_ONLY, useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * A task's signals are bounded (issue 35, point 2): lists come a page at a time with a cursor and
 * a byte cap, a payload over the read's cap is left out (flagged, with its size and a preview cut
 * in the database), the dashboard reads previews only, a task keeps at most
 * `signals.maxKeptPerTask` untaken signals whatever the number of concurrent senders, and the
 * signals go with their task (retention, DELETE, TRUNCATE).
 */

const MIB = 1024 * 1024;
const HOUR = 3_600_000;
const LATER = () => new Date(Date.now() + HOUR);

/** `{"blob":"xx…"}` of about `bytes` bytes of JSON. */
const blob = (bytes: number, fill = 'x') => ({ blob: fill.repeat(bytes - 11) });

/** Takes an `item` signal three times, then ends with them. */
const collector = workflow('collector', async (ctx: WorkflowContext) => {
  const items: unknown[] = [];
  for (let i = 0; i < 3; i++) items.push(await ctx.waitForSignal('item'));
  return items;
});

/** Never reached by a worker in these tests: its tasks are scheduled an hour ahead. */
const idle = workflow('idle', async () => 'never');

const bed = useTestBed({ databasePerTest: true });

async function submitOnly(duraflow: DuraflowModuleOptions = {}): Promise<WorkflowService> {
  const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [idle, collector], ...duraflow } });
  return app.get(WorkflowService);
}

async function signalCount(taskId: string): Promise<number> {
  const { rows } = await bed.db.client.query(`SELECT count(*)::int AS n FROM task_signals WHERE task_id = $1`, [taskId]);
  return rows[0].n;
}

/** A TCP proxy to the test database that counts the bytes PostgreSQL sends through it. */
async function countingProxy(databaseUrl: string): Promise<{ url: string; received: () => number; close: () => Promise<void> }> {
  const target = new URL(databaseUrl);
  let received = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = new Socket();
    sockets.add(client).add(upstream);
    upstream.connect(Number(target.port || 5432), target.hostname);
    upstream.on('data', (chunk: Buffer) => (received += chunk.length));
    client.pipe(upstream).pipe(client);
    const end = () => (client.destroy(), upstream.destroy());
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxied = new URL(databaseUrl);
  proxied.hostname = '127.0.0.1';
  proxied.port = String((server.address() as { port: number }).port);
  return {
    url: proxied.toString(),
    received: () => received,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('pages of signals', () => {
  it('lists a task’s signals in send order, a page at a time, with a cursor to the next page', async () => {
    const workflows = await submitOnly();
    const task = await workflows.submit('idle', {}, { scheduledAt: LATER() });
    for (let i = 1; i <= 5; i++) await workflows.signal(task.id, `note-${i}`, { i });

    const first = await workflows.listSignals(task.id, { limit: 2 });
    const second = await workflows.listSignals(task.id, { limit: 2, after: first.nextCursor! });
    const third = await workflows.listSignals(task.id, { limit: 2, after: second.nextCursor! });

    expect([first, second, third].map((page) => page.items.map((signal) => signal.name))).toEqual([
      ['note-1', 'note-2'],
      ['note-3', 'note-4'],
      ['note-5'],
    ]);
    expect(third.nextCursor).toBeNull();
    expect(first.items[0]).toMatchObject({ payload: { i: 1 }, payloadOmitted: false, payloadPreview: '{"i": 1}', consumedAt: null });
    expect((await workflows.listSignals(task.id)).items).toHaveLength(5);
    expect(await workflows.getSignals(task.id)).toHaveLength(5);
    expect(await workflows.listSignals(randomUUID())).toEqual({ items: [], nextCursor: null });
  });

  it('refuses a bad cursor, limit or maxPayloadBytes with a typed error', async () => {
    const workflows = await submitOnly({ maxListPageBytes: MIB });
    const task = await workflows.submit('idle', {}, { scheduledAt: LATER() });
    await expect(workflows.listSignals(task.id, { after: 'not-a-cursor' })).rejects.toBeInstanceOf(InvalidCursorError);
    await expect(workflows.listSignals(task.id, { limit: 0 })).rejects.toBeInstanceOf(InvalidListOptionsError);
    await expect(workflows.listSignals(task.id, { maxPayloadBytes: -1 })).rejects.toBeInstanceOf(InvalidListOptionsError);
    await expect(workflows.listSignals(task.id, { maxPayloadBytes: MIB + 1 })).rejects.toBeInstanceOf(InvalidListOptionsError);
  });

  it('leaves out payloads over maxPayloadBytes (flagged, with size and preview) and ends a page at maxListPageBytes', async () => {
    const workflows = await submitOnly({ maxListPageBytes: 300_000 });
    const task = await workflows.submit('idle', {}, { scheduledAt: LATER() });
    for (const fill of ['a', 'b', 'c']) await workflows.signal(task.id, 'report', blob(100_000, fill));

    const previews = await workflows.listSignals(task.id);
    expect(previews.nextCursor).toBeNull();
    for (const signal of previews.items) {
      expect(signal).toMatchObject({ payload: null, payloadOmitted: true });
      expect(signal.payloadBytes).toBeGreaterThanOrEqual(100_000);
      expect(signal.payloadPreview).toHaveLength(200);
    }
    expect(previews.items[1].payloadPreview).toMatch(/^\{"blob": "bbbb/);

    const whole = await workflows.listSignals(task.id, { maxPayloadBytes: 200_000 });
    expect(whole.items.map((signal) => (signal.payload as { blob: string }).blob[0])).toEqual(['a', 'b']);
    const rest = await workflows.listSignals(task.id, { maxPayloadBytes: 200_000, after: whole.nextCursor! });
    expect(rest).toMatchObject({ items: [{ payload: blob(100_000, 'c') }], nextCursor: null });

    expect(await workflows.getSignal(task.id, previews.items[2].id)).toMatchObject({ payload: blob(100_000, 'c'), payloadOmitted: false });
    expect(await workflows.getSignal(task.id, '999999')).toBeNull();
    expect((await workflows.getSignals(task.id)).map((signal) => signal.payload)).toEqual(
      ['a', 'b', 'c'].map((fill) => blob(100_000, fill)),
    );
  });
});

describe('signals kept per task', () => {
  it('keeps at most maxKeptPerTask untaken signals under concurrent senders; the rest get SignalLimitExceededError and write nothing', async () => {
    const workflows = await submitOnly({ signals: { maxKeptPerTask: 5 } });
    const task = await workflows.submit('idle', {}, { scheduledAt: LATER() });

    const sends = await Promise.allSettled(Array.from({ length: 40 }, (_, i) => workflows.signal(task.id, 'note', { i })));

    expect(sends.filter((send) => send.status === 'fulfilled')).toHaveLength(5);
    const refused = sends.filter((send): send is PromiseRejectedResult => send.status === 'rejected').map((send) => send.reason);
    expect(refused).toHaveLength(35);
    for (const error of refused) expect(error).toMatchObject({ code: 'SIGNAL_LIMIT_EXCEEDED', maxKeptPerTask: 5 });
    expect(refused[0]).toBeInstanceOf(SignalLimitExceededError);
    expect(await signalCount(task.id)).toBe(5);
  });

  it('does not count the signals a wait took, nor one handed to a waiting wait at once', async () => {
    const app = await bed.start({ duraflow: { workflows: [collector], signals: { maxKeptPerTask: 1 } } });
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('collector', {});
    await workflows.signal(task.id, 'item', 'first');
    await eventually('the first item is taken', async () => (await workflows.getSignals(task.id))[0]?.consumedAt);
    await workflows.signal(task.id, 'note', 'kept for ever');
    await expect(workflows.signal(task.id, 'note', 'one too many')).rejects.toBeInstanceOf(SignalLimitExceededError);

    for (const [n, item] of [
      [2, 'second'],
      [3, 'third'],
    ] as const) {
      await eventually(`the task waits for item ${n}, suspended`, async () => {
        const waiting = (await workflows.getSteps(task.id)).some(
          (step) => step.stepKey === `signal:item#${n}` && step.status === 'waiting',
        );
        return waiting && (await workflows.get(task.id))?.status === 'pending';
      });
      await workflows.signal(task.id, 'item', item);
    }
    expect(await workflows.waitFor(task.id, { timeoutMs: 20_000 })).toMatchObject({
      status: 'completed',
      output: ['first', 'second', 'third'],
    });
  });
});

describe('the dashboard’s signals', () => {
  it('shows a page of previews cut in the database: 20 signals of 1 MB read well under 1 MB from PostgreSQL', async () => {
    const proxy = bed.closeLater(await countingProxy(bed.db.url));
    const { app, url } = await bed.serve({
      databaseUrl: proxy.url,
      duraflow: { ...SUBMIT_ONLY, workflows: [idle], listenUrl: bed.db.url },
      imports: [DuraflowDashboardModule.forRoot({ path: '/ops', guards: [OperatorGuard], pageSize: 5 })],
    });
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('idle', {}, { scheduledAt: LATER() });
    for (let i = 0; i < 20; i++) await workflows.signal(task.id, `report-${i}`, blob(1_000_000, String.fromCharCode(97 + i)));

    const before = proxy.received();
    const response = await fetch(`${url}/ops/tasks/${task.id}`, { headers: OPERATOR_HEADERS });
    const page = await response.text();
    const read = proxy.received() - before;

    expect(response.status).toBe(200);
    expect(read).toBeLessThan(MIB);
    expect(page.length).toBeLessThan(200_000);
    expect(page).toContain('Signals (5 on this page)');
    expect(page).toContain('{&quot;blob&quot;: &quot;aaaa');
    expect(page).not.toContain('report-5<');
    const next = /href="([^"]*\?signals=[^"]+)"/.exec(page)?.[1].replace(/&amp;/g, '&');
    expect(next).toBeDefined();
    const later = await (await fetch(`${url}${next}`, { headers: OPERATOR_HEADERS })).text();
    expect(later).toContain('<code>report-5</code>');
    expect(later).not.toContain('<code>report-4</code>');
  });
});

describe('signals go with their task', () => {
  async function insertTask(status: string, finishedAgoMs: number): Promise<string> {
    const { rows } = await bed.db.client.query<{ id: string }>(
      `INSERT INTO agent_tasks (workflow_name, status, created_at, completed_at, updated_at)
       VALUES ('idle', $1::varchar, now() - ($2::bigint + 1000) * interval '1 millisecond',
               now() - $2::bigint * interval '1 millisecond', now() - $2::bigint * interval '1 millisecond')
       RETURNING id`,
      [status, finishedAgoMs],
    );
    await bed.db.client.query(`INSERT INTO task_signals (task_id, name, payload) SELECT $1, 'note', '{}' FROM generate_series(1, 3)`, [
      rows[0].id,
    ]);
    return rows[0].id;
  }

  it('deletes them with the task: retention, a DELETE and a TRUNCATE', async () => {
    const app = await bed.start({
      imports: [ScheduleModule.forRoot()],
      duraflow: { ...SUBMIT_ONLY, reaper: { enabled: false, leaderKey: `duraflow:test:${randomUUID()}` }, retention: { completed: HOUR } },
    });
    const expired = await insertTask('completed', 2 * HOUR);
    const young = await insertTask('completed', HOUR / 2);
    const deleted = await insertTask('failed', HOUR / 2);

    await app.get(ReaperService).removeExpiredTasks();
    expect(await signalCount(expired)).toBe(0);
    expect(await signalCount(young)).toBe(3);

    await bed.db.client.query(`DELETE FROM agent_tasks WHERE id = $1`, [deleted]);
    expect(await signalCount(deleted)).toBe(0);
    expect(await signalCount(young)).toBe(3);

    await bed.db.client.query(`TRUNCATE agent_tasks, step_runs, dead_letter_queue`);
    expect(await signalCount(young)).toBe(0);
  });
});

describe('the engine’s signal lists', () => {
  it('HTTP pages with ?limit=&after= and X-Next-Cursor / Link; gRPC ListSignals pages with next_cursor', async () => {
    const engine = await startTestEngine(bed);
    const client = bed.closeLater(createDuraflowClient(engine.grpcAddress!), async (opened) => opened.close());
    const created = await http(engine, 'POST', '/tasks', {
      body: { workflowName: 'approval', input: { request: 'desk' }, scheduledAt: LATER().toISOString() },
    });
    for (const name of ['a', 'b', 'c'])
      await http(engine, 'POST', `/tasks/${created.body.id}/signals/${name}`, { body: { payload: name } });

    const get = async (query: string) => {
      const response = await fetch(`${engine.httpUrl}/tasks/${created.body.id}/signals${query}`);
      return { body: (await response.json()) as any, cursor: response.headers.get('x-next-cursor'), link: response.headers.get('link') };
    };
    const first = await get('?limit=2');
    expect(first.body.map((signal: { name: string }) => signal.name)).toEqual(['a', 'b']);
    expect(first.link).toBe(`<?after=${first.cursor}&limit=2>; rel="next"`);
    const last = await get(`?limit=2&after=${first.cursor}`);
    expect(last.body).toEqual([expect.objectContaining({ name: 'c', payload: 'c', payloadOmitted: false })]);
    expect(last.cursor).toBeNull();
    expect((await http(engine, 'GET', `/tasks/${created.body.id}/signals?after=bad`)).body).toMatchObject({ code: 'INVALID_CURSOR' });
    expect((await http(engine, 'GET', `/tasks/${created.body.id}/signals/${first.body[1].id}`)).body).toMatchObject({
      name: 'b',
      payload: 'b',
    });
    expect((await http(engine, 'GET', `/tasks/${created.body.id}/signals/12345678`)).status).toBe(404);

    const page = await client.ListSignals({ task_id: created.body.id, limit: 2 });
    expect(page.signals.map((signal: { name: string }) => signal.name)).toEqual(['a', 'b']);
    const rest = await client.ListSignals({ task_id: created.body.id, limit: 2, cursor: page.next_cursor });
    expect(rest).toMatchObject({ signals: [{ name: 'c', payload: '"c"', payload_omitted: false }], next_cursor: '' });
  });
});
