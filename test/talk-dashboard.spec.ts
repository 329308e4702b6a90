import { WorkflowService } from '@duraflow/nestjs';
import { OPERATOR_HEADERS, startDashboardApp } from './fixtures/dashboard/dashboard-app';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * The dashboard's task page shows the run's events (latest values) and streams (their last
 * chunks), and its live feed moves when the run writes to a stream: the task's row does not
 * change then, so the page's fingerprint takes the events and streams too.
 */

const bed = useTestBed();

/** Rows as a run writes them (the run's writing is tested in events.spec.ts and streams.spec.ts). */
async function writeTalk(taskId: string, chunks: number, from = 1, close = false): Promise<void> {
  await bed.db.client.query(
    `INSERT INTO task_streams (task_id, key, last_seq, closed_at) VALUES ($1, 'tokens', $2::int + $3::int - 1, CASE WHEN $4::boolean THEN now() END)
     ON CONFLICT (task_id, key) DO UPDATE SET last_seq = EXCLUDED.last_seq, closed_at = EXCLUDED.closed_at`,
    [taskId, from, chunks, close],
  );
  await bed.db.client.query(
    `INSERT INTO task_stream_chunks (task_id, key, seq, chunk, origin, created_at)
     SELECT $1, 'tokens', n, to_jsonb('<t' || n || '>'), 'b:' || n, now() FROM generate_series($2::int, $2::int + $3::int - 1) n`,
    [taskId, from, chunks],
  );
}

describe('events and streams on the dashboard', () => {
  it('lists the latest value of each event and the last chunks of each stream, escaped', async () => {
    const app = await startDashboardApp(bed);
    const workflows = app.app.get(WorkflowService);
    const task = await workflows.submit('approval', {});
    await bed.db.client.query(
      `INSERT INTO task_events (task_id, key, value, position, updated_at) VALUES ($1, 'progress', '{"done":"<3>"}', 4, now())`,
      [task.id],
    );
    await writeTalk(task.id, 12, 1, true);

    const response = await fetch(`${app.url}/ops/duraflow/tasks/${task.id}`, { headers: OPERATOR_HEADERS });
    const page = await response.text();

    expect(response.status).toBe(200);
    const events = page.slice(page.indexOf('<h2>Events'), page.indexOf('</table>', page.indexOf('<h2>Events')));
    expect(events).toContain('<code>progress</code>');
    expect(events).toContain('{&quot;done&quot;:&quot;&lt;3&gt;&quot;}');
    const streams = page.slice(page.indexOf('<h2>Streams'));
    expect(streams).toMatch(/^<h2>Streams \(1\)<\/h2>/);
    expect(streams).toContain('12 chunks, closed');
    expect(streams).toContain('<ol class="stream-tail" start="3">');
    expect(streams).toContain('&quot;&lt;t12&gt;&quot;');
    expect(streams).not.toContain('&lt;t2&gt;');
    expect(streams).toContain('The last 10');
  });

  it('moves the live feed when the run writes a chunk, though the task’s row stays as it is', async () => {
    const app = await startDashboardApp(bed);
    const workflows = app.app.get(WorkflowService);
    const task = await workflows.submit('approval', {});
    await eventually('the run waits in its second step', async () => (await workflows.getSteps(task.id)).length >= 1);
    const controller = new AbortController();
    const response = await fetch(`${app.url}/ops/duraflow/tasks/${task.id}/events`, {
      headers: OPERATOR_HEADERS,
      signal: controller.signal,
    });
    const versions: string[] = [];
    const reading = (async () => {
      const decoder = new TextDecoder();
      for await (const part of response.body as unknown as AsyncIterable<Uint8Array>) {
        for (const match of decoder.decode(part).matchAll(/"version":"([0-9a-f]+)"/g)) versions.push(match[1]);
      }
    })().catch(() => undefined);
    await eventually('the first progress event', () => versions.length === 1);
    await writeTalk(task.id, 1);
    await eventually('a new version after the chunk', () => versions.length === 2, { timeoutMs: 10_000 });
    expect(versions[1]).not.toBe(versions[0]);
    controller.abort();
    await reading;
    await workflows.cancel(task.id);
  });
});
