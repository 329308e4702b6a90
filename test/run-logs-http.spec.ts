import { http, startTestEngine } from './fixtures/engine/engine-app';
import { useTestBed } from './support/test-bed';
import { RunningEngine } from '../src/engine';

/* The engine's `GET /tasks/:id/logs?afterSeq=&limit=`: a page of the run's ctx.log lines. */

const MISSING_ID = '00000000-0000-4000-8000-000000000000';
const bed = useTestBed();

describe('the engine’s run log API', () => {
  let engine: RunningEngine;

  beforeAll(async () => {
    engine = await startTestEngine(bed);
  });

  it('GET /tasks/:id/logs pages the lines in order; 404 for no task, 400 for a bad afterSeq', async () => {
    const created = await http(engine, 'POST', '/tasks', { body: { workflowName: 'approval', input: { request: 'pen' } } });
    const id = created.body.id as string;
    // The lines as a run writes them (the worker's writing is tested in run-logs.spec.ts).
    await bed.db.client.query(
      `INSERT INTO task_logs (task_id, seq, level, message, metadata, step_key, attempt, logged_at)
       VALUES ($1, 1, 'info', 'asked', '{"by":"ada"}', NULL, NULL, now()), ($1, 2, 'warn', 'slow', NULL, 'check', 2, now()),
              ($1, 3, 'error', 'late', NULL, NULL, NULL, now())`,
      [id],
    );

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
});
