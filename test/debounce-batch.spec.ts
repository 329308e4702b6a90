import { TestingModule } from '@nestjs/testing';
import { TaskStatus, WorkflowService } from '@duraflow/nestjs';
import { BATCH, DEBOUNCE, eventWorkflows } from './fixtures/events/event-workflows';
import { startEventsWorker } from './fixtures/events/events-test-parts';
import { SUBMIT_ONLY, TestBed, useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';
import { stopAllWorkerProcesses } from './support/worker-process';

/**
 * Debounce and batch (docs/events.md): decided in the database, so every node may close a group
 * and only one starts it; a process killed at any point loses nothing. The worker processes run
 * test/fixtures/events/events-worker-main.ts; the test's own app only publishes.
 */

interface BatchInput {
  events: Array<{ id: string; name: string; payload: { n: number }; publishedAt: string }>;
}

async function readBatches(bed: TestBed): Promise<BatchInput[]> {
  const { rows } = await bed.db.client.query(`SELECT input FROM agent_tasks WHERE workflow_name = 'ev-digest'`);
  return rows.map((row) => row.input as BatchInput);
}

/** Each mail event in exactly one batch, no batch over the maximum; the ids of the events batched. */
async function expectEveryMailInExactlyOneBatch(bed: TestBed, published: string[]): Promise<void> {
  const batches = await readBatches(bed);
  const batched = batches.flatMap((batch) => batch.events.map((event) => event.id));
  expect(batched.length).toBe(published.length);
  expect(new Set(batched)).toEqual(new Set(published));
  expect(Math.max(...batches.map((batch) => batch.events.length))).toBeLessThanOrEqual(BATCH.maxSize);
  const { rows } = await bed.db.client.query(
    `SELECT count(*)::int AS groups, count(task_id)::int AS started FROM duraflow_event_groups WHERE workflow_name = 'ev-digest'`,
  );
  expect(rows[0]).toEqual({ groups: batches.length, started: batches.length });
}

/** Each debounce group started exactly one task, whose input is the payload of the group's last event. */
async function expectOneTaskPerQuietPeriod(bed: TestBed): Promise<number> {
  const { rows } = await bed.db.client.query(
    `SELECT g.id, g.task_id, e.payload AS last_payload, t.input
     FROM duraflow_event_groups g JOIN duraflow_published_events e ON e.id = g.last_event_id
     LEFT JOIN agent_tasks t ON t.id = g.task_id WHERE g.workflow_name = 'ev-reindex'`,
  );
  for (const row of rows) expect(row.input).toEqual(row.last_payload);
  const tasks = await bed.db.client.query(`SELECT count(*)::int AS n FROM agent_tasks WHERE workflow_name = 'ev-reindex'`);
  expect(tasks.rows[0].n).toBe(rows.length);
  return rows.length;
}

async function noGroupOpen(bed: TestBed): Promise<boolean> {
  const { rows } = await bed.db.client.query(`SELECT count(*)::int AS n FROM duraflow_event_groups WHERE started_at IS NULL`);
  return rows[0].n === 0;
}

describe('debounce and batch', () => {
  const bed = useTestBed({ databasePerTest: true });
  let workflows: WorkflowService;

  beforeEach(async () => {
    const app: TestingModule = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: eventWorkflows() } });
    workflows = app.get(WorkflowService);
  });

  afterEach(() => stopAllWorkerProcesses());

  it('starts one task per quiet period of a key, with the last payload, on one of two racing nodes', async () => {
    startEventsWorker(bed, 'a');
    startEventsWorker(bed, 'b');
    // Waves of changes to 20 documents: each wave's events of a document fall in one quiet period or the next.
    for (let wave = 0; wave < 5; wave++) {
      await Promise.all(Array.from({ length: 60 }, (_, i) => workflows.publish('doc.changed', { docId: `doc-${i % 20}`, wave, i })));
    }
    await eventually('every debounce started', () => noGroupOpen(bed), { timeoutMs: 60_000 });
    const periods = await expectOneTaskPerQuietPeriod(bed);
    expect(periods).toBeGreaterThanOrEqual(20);
    const { rows } = await bed.db.client.query(
      `SELECT count(*)::int AS n FROM duraflow_event_deliveries d JOIN duraflow_event_groups g ON g.id = d.group_id WHERE g.workflow_name = 'ev-reindex'`,
    );
    expect(rows[0].n).toBe(300);
  });

  it('puts every event in exactly one batch when two nodes race to close them', async () => {
    startEventsWorker(bed, 'a');
    startEventsWorker(bed, 'b');
    const published: string[] = [];
    for (let wave = 0; wave < 6; wave++) {
      const results = await Promise.all(Array.from({ length: 40 }, (_, i) => workflows.publish('mail.received', { n: wave * 40 + i })));
      published.push(...results.map((result) => result.eventId));
    }
    await eventually('every batch started', () => noGroupOpen(bed), { timeoutMs: 60_000 });
    await expectEveryMailInExactlyOneBatch(bed, published);
    await eventually(
      'every batch ran',
      async () => (await bed.rows.count('agent_tasks', `workflow_name = 'ev-digest' AND status <> $1`, [TaskStatus.COMPLETED])) === 0,
    );
  });

  it('loses no event and starts no batch twice when a node is killed (SIGKILL) while batches close', async () => {
    const doomed = startEventsWorker(bed, 'doomed');
    startEventsWorker(bed, 'survivor');
    await Promise.all([doomed.ready]);
    const published: string[] = [];
    for (let wave = 0; wave < 8; wave++) {
      if (wave === 4) doomed.kill('SIGKILL');
      const results = await Promise.all(Array.from({ length: 30 }, (_, i) => workflows.publish('mail.received', { n: wave * 30 + i })));
      published.push(...results.map((result) => result.eventId));
    }
    await eventually('every batch started', () => noGroupOpen(bed), { timeoutMs: 60_000 });
    await expectEveryMailInExactlyOneBatch(bed, published);
  });

  it('starts a busy key at most maxWaitMs after the period began, and a batch by its timeout when it never fills', async () => {
    const first = await workflows.publish('doc.changed', { docId: 'busy', n: 1 });
    const groupId = first.deliveries[0].groupId!;
    // As if the period began just under maxWaitMs ago: the next event may not push the start past that bound.
    await bed.db.client.query(`UPDATE duraflow_event_groups SET opened_at = now() - make_interval(secs => $2) WHERE id = $1`, [
      groupId,
      (DEBOUNCE.maxWaitMs - 50) / 1000,
    ]);
    await workflows.publish('doc.changed', { docId: 'busy', n: 2 });
    const { rows } = await bed.db.client.query(`SELECT due_at, opened_at, event_count FROM duraflow_event_groups WHERE id = $1`, [groupId]);
    expect(rows[0].event_count).toBe(2);
    expect(rows[0].due_at.getTime()).toBe(rows[0].opened_at.getTime() + DEBOUNCE.maxWaitMs);

    const mail = await workflows.publish('mail.received', { n: 0 });
    startEventsWorker(bed, 'closer');
    await eventually('the lone mail was batched', async () => (await readBatches(bed)).length === 1, { timeoutMs: 30_000 });
    expect((await readBatches(bed))[0].events.map((event) => [event.id, event.payload])).toEqual([[mail.eventId, { n: 0 }]]);
    await eventually('the busy document was reindexed', () => noGroupOpen(bed), { timeoutMs: 30_000 });
    await expectOneTaskPerQuietPeriod(bed);
  });
});
