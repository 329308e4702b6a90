import { TaskStatus, WorkflowService } from '@duraflow/nestjs';
import { eventWorkflows } from './fixtures/events/event-workflows';
import { startEventsWorker } from './fixtures/events/events-test-parts';
import { SUBMIT_ONLY, TestBed, useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';
import { stopAllWorkerProcesses } from './support/worker-process';

/**
 * A debounce survives the death of the process that published its events and would have closed
 * it (docs/events.md, DESIGN.md semantics 19): the group is a row, so a worker that starts later
 * starts it once, with the last payload. The worker processes run
 * test/fixtures/events/events-worker-main.ts (`ev-crash-reindex`: `doc.saved`, keyed by docId,
 * quiet for 2 s); the test's own app runs nothing.
 */

interface GroupRow {
  group_key: string;
  event_count: number;
  started_at: Date | null;
  task_id: string | null;
  input: unknown;
  status: string | null;
}

async function crashGroups(bed: TestBed): Promise<GroupRow[]> {
  const { rows } = await bed.db.client.query(
    `SELECT g.group_key, g.event_count, g.started_at, g.task_id, t.input, t.status
     FROM duraflow_event_groups g LEFT JOIN agent_tasks t ON t.id = g.task_id
     WHERE g.workflow_name = 'ev-crash-reindex' ORDER BY g.group_key`,
  );
  return rows;
}

describe('debounce: a worker killed while a group is open', () => {
  const bed = useTestBed();
  let workflows: WorkflowService;

  beforeAll(async () => {
    workflows = (await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: eventWorkflows() } })).get(WorkflowService);
  });

  afterAll(() => stopAllWorkerProcesses());

  it('starts exactly one task per key, with its last payload, on a worker started after the publisher and closer was SIGKILLed', async () => {
    const doomed = startEventsWorker(bed, 'doomed');
    await doomed.ready;
    for (let n = 1; n <= 3; n++) {
      for (const docId of ['a', 'b']) await doomed.call('WorkflowService', 'publish', 'doc.saved', { docId, n });
    }
    doomed.kill('SIGKILL');
    expect((await doomed.exited).signal).toBe('SIGKILL');

    // What the killed process left: each key's group open with its three events, no task.
    expect((await crashGroups(bed)).map((group) => [group.group_key, group.event_count, group.started_at, group.task_id])).toEqual([
      ['a', 3, null, null],
      ['b', 3, null, null],
    ]);
    expect(await bed.rows.count('agent_tasks', `workflow_name = 'ev-crash-reindex'`)).toBe(0);

    startEventsWorker(bed, 'successor');
    const groups = await eventually('both keys ran', () => crashGroups(bed), {
      until: (rows) => rows.length === 2 && rows.every((row) => row.status === TaskStatus.COMPLETED),
      timeoutMs: 30_000,
    });
    expect(groups.map((group) => [group.group_key, group.event_count, group.input])).toEqual([
      ['a', 3, { docId: 'a', n: 3 }],
      ['b', 3, { docId: 'b', n: 3 }],
    ]);
    expect(await bed.rows.count('agent_tasks', `workflow_name = 'ev-crash-reindex'`)).toBe(2);
    const done = await workflows.waitFor(groups[0].task_id!, { timeoutMs: 20_000 });
    expect(done.output).toEqual({ docId: 'a', n: 3 });
  });
});
