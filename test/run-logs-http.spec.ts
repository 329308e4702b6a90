import { status } from '@grpc/grpc-js';
import { createDuraflowClient, DuraflowClient, grpcError } from './fixtures/engine/grpc-client';
import { http, startTestEngine } from './fixtures/engine/engine-app';
import { useTestBed } from './support/test-bed';
import { RunningEngine } from '../src/engine';

/* The engine's `GET /tasks/:id/logs?afterSeq=&limit=`: a page of the run's ctx.log lines. */

const MISSING_ID = '00000000-0000-4000-8000-000000000000';
const bed = useTestBed();

describe('the engine’s run log API', () => {
  let engine: RunningEngine;
  let client: DuraflowClient;

  beforeAll(async () => {
    engine = await startTestEngine(bed);
    client = bed.closeLater(createDuraflowClient(engine.grpcAddress!), async (opened) => opened.close());
  });

  async function taskWithLines(): Promise<string> {
    const created = await http(engine, 'POST', '/tasks', { body: { workflowName: 'approval', input: { request: 'pen' } } });
    const id = created.body.id as string;
    // The lines as a run writes them (the worker's writing is tested in run-logs.spec.ts).
    await bed.db.client.query(
      `INSERT INTO task_logs (task_id, seq, level, message, metadata, step_key, attempt, logged_at)
       VALUES ($1, 1, 'info', 'asked', '{"by":"ada"}', NULL, NULL, now()), ($1, 2, 'warn', 'slow', NULL, 'check', 2, now()),
              ($1, 3, 'error', 'late', NULL, NULL, NULL, now())`,
      [id],
    );
    return id;
  }

  it('GET /tasks/:id/logs pages the lines in order; 404 for no task, 400 for a bad afterSeq', async () => {
    const id = await taskWithLines();

    const first = await http(engine, 'GET', `/tasks/${id}/logs?limit=2`);
    const rest = await http(engine, 'GET', `/tasks/${id}/logs?afterSeq=${first.body.nextAfterSeq}&limit=2`);

    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      items: [
        { seq: 1, level: 'info', message: 'asked', metadata: { by: 'ada' }, stepKey: null, attempt: null, at: expect.any(String) },
        { seq: 2, level: 'warn', message: 'slow', metadata: null, stepKey: 'check', attempt: 2 },
      ],
      nextAfterSeq: 2,
    });
    expect(rest.body).toMatchObject({ items: [{ seq: 3, message: 'late' }], nextAfterSeq: null });
    expect((await http(engine, 'GET', `/tasks/${MISSING_ID}/logs`)).status).toBe(404);
    expect((await http(engine, 'GET', `/tasks/${id}/logs?afterSeq=-1`)).status).toBe(400);
  });

  it('gRPC GetLogs pages the lines in order; NOT_FOUND for no task', async () => {
    const id = await taskWithLines();

    const first = await client.GetLogs({ task_id: id, limit: 2 });
    const rest = await client.GetLogs({ task_id: id, after_seq: first.next_after_seq, limit: 2 });

    expect(first).toMatchObject({
      lines: [
        { seq: 1, level: 'info', message: 'asked', metadata: '{"by":"ada"}', step_key: '', attempt: 0 },
        { seq: 2, level: 'warn', message: 'slow', metadata: '', step_key: 'check', attempt: 2 },
      ],
      next_after_seq: 2,
    });
    expect(rest).toMatchObject({ lines: [{ seq: 3, message: 'late' }], next_after_seq: 0 });
    await expect(client.GetLogs({ task_id: MISSING_ID })).rejects.toEqual(grpcError(status.NOT_FOUND));
  });
});
