import { createDuraflowClient, DuraflowClient } from './fixtures/engine/grpc-client';
import { http, startTestEngine } from './fixtures/engine/engine-app';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';
import { RunningEngine } from '../src/engine';

/*
 * The engine shows what waits on which flow limit: HTTP `GET /limits` and gRPC `ListLimits`,
 * over the example `tenant-export` workflow (concurrency 4, 1 per tenant, 60 starts a minute).
 */

const bed = useTestBed();

describe('the engine’s flow-limit APIs', () => {
  let engine: RunningEngine;
  let client: DuraflowClient;

  beforeAll(async () => {
    engine = await startTestEngine(bed);
    client = bed.closeLater(createDuraflowClient(engine.grpcAddress!), async (opened) => opened.close());
  });

  it('GET /limits and ListLimits show the running tasks and the runnable ones behind each limit', async () => {
    // Five long exports of one tenant: one runs (keyConcurrency 1), four wait behind the key's limit.
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const created = await http(engine, 'POST', '/tasks', {
        body: { workflowName: 'tenant-export', input: { tenant: 'acme', durationMs: 60_000 } },
      });
      expect(created.status).toBe(201);
      ids.push(created.body.id);
    }
    const limits = await eventually('one acme export runs', async () => (await http(engine, 'GET', '/limits')).body.limits, {
      until: (entries: Array<{ kind: string; key?: string; running: number }>) =>
        entries.some((entry) => entry.kind === 'keyConcurrency' && entry.key === 'acme' && entry.running === 1),
    });
    expect(limits).toEqual(
      expect.arrayContaining([
        { workflow: 'tenant-export', kind: 'concurrency', running: 1, limit: 4, waiting: expect.any(Number) },
        { workflow: 'tenant-export', key: 'acme', kind: 'keyConcurrency', running: 1, limit: 1, waiting: 4 },
        { workflow: 'tenant-export', kind: 'rateLimit', running: expect.any(Number), limit: 60, waiting: expect.any(Number) },
      ]),
    );

    const grpc = await client.ListLimits({});
    expect(grpc.limits).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ workflow: 'tenant-export', key: 'acme', kind: 'keyConcurrency', running: 1, limit: 1, waiting: 4 }),
      ]),
    );
    await Promise.all(ids.map((id) => http(engine, 'POST', `/tasks/${id}/cancel`)));
  });
});
