import { TestingModule } from '@nestjs/testing';
import { TaskStatus, Workflow, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { leakySaga as failingUndoSaga } from './fixtures/events/events-test-parts';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/**
 * Duraflow's own events (docs/events.md, "Duraflow's own events"): a task that reaches
 * completed, rolled_back or partial_rollback starts one task of each workflow subscribed to that
 * event, with `{ taskId, workflowName, workflowVersion, status, parentTaskId, tags, finishedAt }`
 * as input; a task started by one of these events publishes none itself; and nothing is recorded
 * while nobody subscribes. failed, cancelled and dead_letter.created: test/publish.spec.ts.
 */

interface OwnEventPayload {
  taskId: string;
  workflowName: string;
  workflowVersion: number;
  status: string;
  parentTaskId: string | null;
  tags: Record<string, string>;
  finishedAt: string;
}

@Workflow('on-completed', { on: 'duraflow.task.completed' })
class OnCompletedWorkflow {
  async run(ctx: WorkflowContext<OwnEventPayload>) {
    return { seen: ctx.input.taskId };
  }
}

const onRollback = workflow('on-rollback', async (ctx: WorkflowContext<OwnEventPayload>) => ({ seen: ctx.input.taskId }), {
  on: ['duraflow.task.rolled_back', 'duraflow.task.partial_rollback'],
});

const shipOrder = workflow('ship-order', async (ctx) => ({ shipped: (ctx.input as { orderId: string }).orderId }), { version: 2 });
const orderParent = workflow('order-parent', async (ctx) => {
  const shipped = await ctx.runChild<{ shipped: string }>('ship', 'ship-order', { orderId: 'o-child' });
  return { parentSaw: shipped };
});

/** A step fails for good; its completed step is undone: rolled_back. */
const tripSaga = workflow(
  'trip-saga',
  async (ctx) => {
    await ctx.step.run('hold-seat', () => ({ seat: '12A' }));
    await ctx.step.run('pay', () => {
      throw new Error('card declined');
    });
  },
  { compensations: { 'hold-seat': () => undefined }, step: { retries: 0 } },
);

/** A step fails for good and its compensation fails too: partial_rollback. */
const leakySaga = failingUndoSaga('leaky-saga');

describe("Duraflow's own events: completed, rolled_back, partial_rollback", () => {
  const bed = useTestBed();
  let workflows: WorkflowService;

  beforeAll(async () => {
    const app: TestingModule = await bed.start({
      duraflow: { workflows: [onRollback, shipOrder, orderParent, tripSaga, leakySaga], maxRetries: 0 },
      providers: [OnCompletedWorkflow],
    });
    workflows = app.get(WorkflowService);
  });

  /** The tasks of `subscriber` started for the end of `taskId`, oldest first. */
  async function startedFor(subscriber: string, taskId: string) {
    const { rows } = await bed.db.client.query(
      `SELECT id, input, status FROM agent_tasks WHERE workflow_name = $1 AND input->>'taskId' = $2 ORDER BY created_at, id`,
      [subscriber, taskId],
    );
    return rows as Array<{ id: string; input: OwnEventPayload; status: string }>;
  }

  /** The own events recorded about `taskId`, by name. */
  async function eventsAbout(taskId: string): Promise<string[]> {
    const { rows } = await bed.db.client.query(
      `SELECT name FROM duraflow_published_events WHERE name LIKE 'duraflow.%' AND payload->>'taskId' = $1 ORDER BY name`,
      [taskId],
    );
    return rows.map((row) => row.name);
  }

  /** Waits until `subscriber` has run for the end of `taskId`; its task. */
  async function subscriberRan(subscriber: string, taskId: string) {
    const [started] = await eventually(`${subscriber} ran for ${taskId}`, () => startedFor(subscriber, taskId), {
      until: (rows) => rows.length > 0,
    });
    return workflows.waitFor(started.id, { timeoutMs: 20_000 });
  }

  it('starts one task of a subscriber of duraflow.task.completed per completion, with the documented payload', async () => {
    const task = await workflows.submit('ship-order', { orderId: 'o-1' }, { tags: { tenant: 'acme', region: 'eu' } });
    const done = await workflows.waitFor(task.id, { timeoutMs: 20_000 });
    expect(done.status).toBe(TaskStatus.COMPLETED);

    const handled = await subscriberRan('on-completed', task.id);
    expect(handled.status).toBe(TaskStatus.COMPLETED);
    expect(handled.output).toEqual({ seen: task.id });
    const started = await startedFor('on-completed', task.id);
    expect(started).toHaveLength(1);
    const { finishedAt, ...payload } = started[0].input;
    expect(payload).toEqual({
      taskId: task.id,
      workflowName: 'ship-order',
      workflowVersion: 2,
      status: 'completed',
      parentTaskId: null,
      tags: { tenant: 'acme', region: 'eu' },
    });
    expect(Date.parse(finishedAt)).toBeGreaterThanOrEqual(new Date(task.createdAt).getTime());
    expect(await eventsAbout(task.id)).toEqual(['duraflow.task.completed']);
    // Nobody subscribes to a rollback of it, nor does a completion reach on-rollback.
    expect(await startedFor('on-rollback', task.id)).toEqual([]);
  });

  it("names the parent of a child workflow in its completion's payload, and gives the parent's completion its own task", async () => {
    const parent = await workflows.submit('order-parent', {});
    expect((await workflows.waitFor(parent.id, { timeoutMs: 20_000 })).status).toBe(TaskStatus.COMPLETED);
    const { rows } = await bed.db.client.query(`SELECT id FROM agent_tasks WHERE parent_task_id = $1`, [parent.id]);
    expect(rows).toHaveLength(1);
    const childId: string = rows[0].id;

    await subscriberRan('on-completed', childId);
    await subscriberRan('on-completed', parent.id);
    const [forChild] = await startedFor('on-completed', childId);
    const [forParent] = await startedFor('on-completed', parent.id);
    expect(forChild.input).toMatchObject({ taskId: childId, workflowName: 'ship-order', parentTaskId: parent.id, status: 'completed' });
    expect(forParent.input).toMatchObject({ taskId: parent.id, workflowName: 'order-parent', parentTaskId: null, workflowVersion: 1 });
    expect(await startedFor('on-completed', childId)).toHaveLength(1);
    expect(await startedFor('on-completed', parent.id)).toHaveLength(1);
  });

  it('starts one task of a subscriber of duraflow.task.rolled_back when a saga is undone', async () => {
    const task = await workflows.submit('trip-saga', {}, { tags: { trip: 't-1' } });
    expect((await workflows.waitFor(task.id, { timeoutMs: 20_000 })).status).toBe(TaskStatus.ROLLED_BACK);

    const handled = await subscriberRan('on-rollback', task.id);
    expect(handled.output).toEqual({ seen: task.id });
    const started = await startedFor('on-rollback', task.id);
    expect(started).toHaveLength(1);
    expect(started[0].input).toMatchObject({
      taskId: task.id,
      workflowName: 'trip-saga',
      workflowVersion: 1,
      status: 'rolled_back',
      parentTaskId: null,
      tags: { trip: 't-1' },
    });
    expect(await eventsAbout(task.id)).toEqual(['duraflow.task.rolled_back']);
    expect(await startedFor('on-completed', task.id)).toEqual([]);
  });

  it('starts one task of a subscriber of duraflow.task.partial_rollback when a compensation fails for good', async () => {
    const task = await workflows.submit('leaky-saga', {});
    expect((await workflows.waitFor(task.id, { timeoutMs: 20_000 })).status).toBe(TaskStatus.PARTIAL_ROLLBACK);

    await subscriberRan('on-rollback', task.id);
    const started = await startedFor('on-rollback', task.id);
    expect(started).toHaveLength(1);
    expect(started[0].input).toMatchObject({ taskId: task.id, workflowName: 'leaky-saga', status: 'partial_rollback', tags: {} });
    // No workflow here subscribes to dead letters: only the task's end is recorded.
    expect(await eventsAbout(task.id)).toEqual(['duraflow.task.partial_rollback']);
  });

  it('publishes nothing when a task started by an own event ends: a subscriber of completions does not start itself again', async () => {
    const task = await workflows.submit('ship-order', { orderId: 'o-loop' });
    await workflows.waitFor(task.id, { timeoutMs: 20_000 });
    const handled = await subscriberRan('on-completed', task.id);
    expect(handled.status).toBe(TaskStatus.COMPLETED);
    const rollback = await workflows.submit('trip-saga', {});
    await workflows.waitFor(rollback.id, { timeoutMs: 20_000 });
    const undoneHandled = await subscriberRan('on-rollback', rollback.id);
    expect(undoneHandled.status).toBe(TaskStatus.COMPLETED);

    // An own event is published in the transaction of the status change: once the subscribers'
    // tasks are completed, anything their ends published is already there to see.
    for (const settled of [handled.id, undoneHandled.id]) {
      expect(await eventsAbout(settled)).toEqual([]);
      expect(await startedFor('on-completed', settled)).toEqual([]);
    }
    expect(await startedFor('on-completed', task.id)).toHaveLength(1);
    // Over every subscriber task of this suite so far: none was started for the end of another.
    const { rows } = await bed.db.client.query(
      `SELECT count(*)::int AS n FROM agent_tasks t JOIN agent_tasks subscriber ON subscriber.id::text = t.input->>'taskId'
       WHERE t.workflow_name IN ('on-completed', 'on-rollback') AND subscriber.workflow_name IN ('on-completed', 'on-rollback')`,
    );
    expect(rows[0].n).toBe(0);
  });
});

const digests: OwnEventPayload[] = [];
const completionDigest = workflow('completion-digest', async (ctx: WorkflowContext<OwnEventPayload>) => void digests.push(ctx.input), {
  on: 'duraflow.task.completed',
  debounce: { key: 'workflowName', periodMs: 50 },
});
const completionBatch = workflow(
  'completion-batch',
  async (ctx: WorkflowContext<{ events: Array<{ payload: OwnEventPayload }> }>) =>
    void digests.push(...ctx.input.events.map((event) => event.payload)),
  { on: 'duraflow.task.completed', batch: { maxSize: 10, timeoutMs: 50 } },
);
const plain = workflow('plain', async () => 'done');

describe("Duraflow's own events: a debounced and a batched subscriber", () => {
  const bed = useTestBed();

  it('start once each for a completion, and their own completions publish nothing', async () => {
    const app = await bed.start({
      duraflow: { workflows: [completionDigest, completionBatch, plain], events: { groupPollIntervalMs: 20 } },
    });
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('plain', {});
    await workflows.waitFor(task.id, { timeoutMs: 20_000 });
    const { rows } = await eventually(
      'the digest and the batch ran and completed',
      () =>
        bed.db.client.query(
          `SELECT id FROM agent_tasks WHERE workflow_name IN ('completion-digest', 'completion-batch') AND status = 'completed'`,
        ),
      { until: (result) => result.rows.length >= 2 },
    );
    expect(rows).toHaveLength(2);
    expect(digests.map((digest) => digest.taskId)).toEqual([task.id, task.id]);
    // Their tasks were started by an own event (through a group): their completions are not events.
    const events = await bed.db.client.query(
      `SELECT count(*)::int AS n FROM duraflow_published_events WHERE payload->>'taskId' = ANY($1)`,
      [rows.map((row) => row.id)],
    );
    expect(events.rows[0].n).toBe(0);
    const groups = await bed.db.client.query(`SELECT workflow_name, task_id FROM duraflow_event_groups ORDER BY workflow_name`);
    expect(groups.rows.map((group) => group.workflow_name)).toEqual(['completion-batch', 'completion-digest']);
    expect(await bed.rows.count('agent_tasks')).toBe(3);
  });
});

describe("Duraflow's own events: nobody subscribes", () => {
  const bed = useTestBed();

  it('records no event and no delivery when tasks complete, roll back, fail or are cancelled', async () => {
    const failing = workflow('failing', async () => {
      throw new Error('boom');
    });
    const app = await bed.start({ duraflow: { workflows: [shipOrder, orderParent, tripSaga, leakySaga, failing, plain], maxRetries: 0 } });
    const workflows = app.get(WorkflowService);
    const submitted = await Promise.all([
      workflows.submit('ship-order', { orderId: 'o-quiet' }),
      workflows.submit('order-parent', {}),
      workflows.submit('trip-saga', {}),
      workflows.submit('leaky-saga', {}),
      workflows.submit('failing', {}),
    ]);
    const parked = await workflows.submit('plain', {}, { scheduledAt: new Date(Date.now() + 3_600_000) });
    await workflows.cancel(parked.id);
    const ends = await Promise.all(submitted.map((task) => workflows.waitFor(task.id, { timeoutMs: 20_000 })));
    expect(ends.map((end) => end.status)).toEqual([
      TaskStatus.COMPLETED,
      TaskStatus.COMPLETED,
      TaskStatus.ROLLED_BACK,
      TaskStatus.PARTIAL_ROLLBACK,
      TaskStatus.FAILED,
    ]);
    expect((await workflows.get(parked.id))!.status).toBe(TaskStatus.CANCELLED);

    const { rows } = await bed.db.client.query(
      `SELECT (SELECT count(*) FROM duraflow_event_subscriptions)::int AS subscriptions,
              (SELECT count(*) FROM duraflow_published_events)::int AS events,
              (SELECT count(*) FROM duraflow_event_deliveries)::int AS deliveries,
              (SELECT count(*) FROM agent_tasks)::int AS tasks`,
    );
    // Six tasks submitted and the child of order-parent; no event, so nothing else started.
    expect(rows[0]).toEqual({ subscriptions: 0, events: 0, deliveries: 0, tasks: 7 });
  });
});
