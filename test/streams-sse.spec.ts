import { status } from '@grpc/grpc-js';
import { createDuraflowClient, DuraflowClient, grpcError } from './fixtures/engine/grpc-client';
import { http, startTestEngine } from './fixtures/engine/engine-app';
import { useTestBed } from './support/test-bed';
import { RunningEngine } from '../src/engine';

/*
 * The engine's events and streams: GET /tasks/:id/events/:key?waitMs= (and gRPC GetEvent), and
 * the stream as Server-Sent Events at GET /tasks/:id/streams/:key (Last-Event-ID, ?after=, an
 * `end` event at the close). The rows are written here as a run writes them (the run's writing
 * is tested in events.spec.ts and streams.spec.ts), with the NOTIFY its statements send.
 */

const MISSING_ID = '00000000-0000-4000-8000-000000000000';
const bed = useTestBed();

/** One SSE message as the wire carries it. */
interface SseMessage {
  id?: string;
  event?: string;
  data?: string;
}

describe('the engine’s events and streams', () => {
  let engine: RunningEngine;
  let client: DuraflowClient;

  beforeAll(async () => {
    engine = await startTestEngine(bed);
    client = bed.closeLater(createDuraflowClient(engine.grpcAddress!), async (opened) => opened.close());
  });

  /** A task that waits for its approval signal (so it stays unfinished). */
  async function waitingTask(): Promise<string> {
    const created = await http(engine, 'POST', '/tasks', { body: { workflowName: 'approval', input: { request: 'pen' } } });
    return created.body.id as string;
  }

  async function writeChunks(id: string, values: unknown[], close = false): Promise<void> {
    await bed.db.client.query(
      `WITH h AS (
         INSERT INTO task_streams (task_id, key, last_seq, closed_at) VALUES ($1, 'tokens', $2, CASE WHEN $3 THEN now() END)
         ON CONFLICT (task_id, key) DO UPDATE SET last_seq = task_streams.last_seq + $2, closed_at = EXCLUDED.closed_at
         RETURNING last_seq
       )
       INSERT INTO task_stream_chunks (task_id, key, seq, chunk, origin, created_at)
       SELECT $1, 'tokens', h.last_seq - $2 + v.ord, v.value, 'test:' || gen_random_uuid(), now()
       FROM h, jsonb_array_elements($4::jsonb) WITH ORDINALITY AS v(value, ord)`,
      [id, values.length, close, JSON.stringify(values)],
    );
    await bed.db.client.query(`SELECT pg_notify('duraflow_task_talk', $1)`, [id]);
  }

  /** Opens the SSE stream and resolves with its messages once the response ends. */
  async function readSse(path: string, headers: Record<string, string> = {}, onMessage?: (message: SseMessage) => void) {
    const response = await fetch(`${engine.httpUrl}${path}`, { headers: { accept: 'text/event-stream', ...headers } });
    const messages: SseMessage[] = [];
    if (response.status !== 200) return { status: response.status, type: response.headers.get('content-type'), messages };
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const part of response.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(part, { stream: true });
      for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
        const message: SseMessage = {};
        for (const line of buffer.slice(0, end).split('\n')) {
          const [field, ...rest] = line.split(':');
          if (field === 'id' || field === 'event' || field === 'data') message[field] = rest.join(':').trimStart();
        }
        buffer = buffer.slice(end + 2);
        if (message.data !== undefined || message.event) {
          messages.push(message);
          onMessage?.(message);
        }
      }
    }
    return { status: response.status, type: response.headers.get('content-type'), messages };
  }

  it('streams the chunks live as text/event-stream, id = seq, with an end event at the close', async () => {
    const id = await waitingTask();
    await writeChunks(id, ['a', { b: 2 }]);
    let more: Promise<void> | undefined;
    const read = await readSse(`/tasks/${id}/streams/tokens`, {}, (message) => {
      if (message.id === '2') more = writeChunks(id, ['c'], true);
    });
    await more;
    expect(read.status).toBe(200);
    expect(read.type).toMatch(/^text\/event-stream/);
    expect(read.messages).toEqual([
      { id: '1', data: '"a"' },
      { id: '2', data: '{"b":2}' },
      { id: '3', data: '"c"' },
      { id: '3', event: 'end', data: '{"lastSeq":3}' },
    ]);
  });

  it('starts after Last-Event-ID, or after ?after= without one; 404 for no task', async () => {
    const id = await waitingTask();
    await writeChunks(id, ['a', 'b', 'c', 'd'], true);
    const resumed = await readSse(`/tasks/${id}/streams/tokens?after=1`, { 'last-event-id': '3' });
    expect(resumed.messages.map((message) => message.data)).toEqual(['"d"', '{"lastSeq":4}']);
    const after = await readSse(`/tasks/${id}/streams/tokens?after=2`);
    expect(after.messages.map((message) => message.id)).toEqual(['3', '4', '4']);
    expect((await readSse(`/tasks/${MISSING_ID}/streams/tokens`)).status).toBe(404);
    expect((await readSse(`/tasks/${id}/streams/tokens`, { 'last-event-id': 'x' })).status).toBe(400);
  });

  it('GET /tasks/:id/events/:key answers the value, waiting up to waitMs; 408 EVENT_TIMEOUT past it, 404 for no task', async () => {
    const id = await waitingTask();
    const timedOut = await http(engine, 'GET', `/tasks/${id}/events/progress?waitMs=50`);
    expect(timedOut).toMatchObject({ status: 408, body: { code: 'EVENT_TIMEOUT' } });
    const waiting = http(engine, 'GET', `/tasks/${id}/events/progress?waitMs=20000`);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await bed.db.client.query(
      `INSERT INTO task_events (task_id, key, value, position, updated_at) VALUES ($1, 'progress', '{"done":3}', 1, now())`,
      [id],
    );
    await bed.db.client.query(`SELECT pg_notify('duraflow_task_talk', $1)`, [id]);
    expect(await waiting).toEqual({ status: 200, body: { key: 'progress', value: { done: 3 } } });
    expect((await http(engine, 'GET', `/tasks/${MISSING_ID}/events/progress`)).status).toBe(404);
    expect((await http(engine, 'GET', `/tasks/${id}/events/progress?waitMs=-1`)).status).toBe(400);

    expect(await client.GetEvent({ task_id: id, key: 'progress' })).toEqual({ key: 'progress', value: '{"done":3}' });
    await expect(client.GetEvent({ task_id: id, key: 'other', wait_ms: 50 })).rejects.toEqual(grpcError(status.DEADLINE_EXCEEDED));
    await expect(client.GetEvent({ task_id: MISSING_ID, key: 'progress' })).rejects.toEqual(grpcError(status.NOT_FOUND));
  });
});
