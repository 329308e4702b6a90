import { TestingModule } from '@nestjs/testing';
import {
  ChildWorkflowFailedError,
  SagaService,
  DuraflowModuleOptions,
  TaskStatus,
  WorkerService,
  WorkflowContext,
  WorkflowService,
  workflow,
} from '@duraflow/nestjs';
import { Gate } from './fixtures/steps/gate';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * ctx.startChild / ctx.runChild against PostgreSQL: a child started once per key, a parent that
 * waits for it holding no slot and gets its output or ChildWorkflowFailedError, the children
 * listed, a cancel carried down to them, and nested sagas: a parent that rolls back rolls each
 * completed child back at the child's place in its LIFO order (the order is read from a table
 * the compensations write).
 */

const bed = useTestBed();
let childGate = new Gate();

/** A compensation writes the step it undoes here, so the order is read from the database. */
async function logUndo(taskId: string, stepKey: string): Promise<void> {
  await bed.db.client.query(`INSERT INTO compensation_log (task_id, step_key) VALUES ($1, $2)`, [taskId, stepKey]);
}

const doubler = workflow('doubler', async (ctx: WorkflowContext<{ n: number }>) => ctx.step.run('double', () => ctx.input.n * 2));

const failingChild = workflow('failing-child', async () => {
  throw Object.assign(new Error('no stock'), { code: 'OUT_OF_STOCK' });
});

const gatedChild = workflow('gated-child', async (ctx: WorkflowContext) => {
  await ctx.step.run('wait-at-gate', (step) => childGate.wait(step.signal));
  return 'child done';
});

const parentOfDoubler = workflow('parent-of-doubler', async (ctx: WorkflowContext<{ n: number }>) => {
  const doubled = await ctx.runChild<number>('double-it', 'doubler', { n: ctx.input.n });
  return { doubled };
});

const parentOfFailing = workflow('parent-of-failing', async (ctx: WorkflowContext) => {
  try {
    await ctx.runChild('try-it', 'failing-child', {});
    return 'unexpected';
  } catch (error) {
    if (!(error instanceof ChildWorkflowFailedError)) throw error;
    return { code: error.code, status: error.status, childError: error.childError, childTaskId: error.childTaskId };
  }
});

const starter = workflow('starter', async (ctx: WorkflowContext) => {
  const started = await ctx.startChild('kid', 'doubler', { n: 1 });
  await ctx.sleep('after-start', 50);
  const again = await ctx.startChild('kid-2', 'doubler', { n: 2 });
  return { first: started.id, second: again.id };
});

const parentOfGated = workflow('parent-of-gated', async (ctx: WorkflowContext) => ctx.runChild('gated', 'gated-child', {}));

// Nested sagas: parent a, child(x, grandchild(z), y), b, then a failure: undo order b, y, z, x, a.
const undo = (key: string) => ({ [key]: async (_output: unknown, c: { runId: string }) => logUndo(c.runId, key) });
const grandchild = workflow('grandchild', async (ctx: WorkflowContext) => ctx.step.run('z', () => 'z'), { compensations: undo('z') });
const middleChild = workflow(
  'middle-child',
  async (ctx: WorkflowContext) => {
    await ctx.step.run('x', () => 'x');
    await ctx.runChild('g', 'grandchild', {});
    await ctx.step.run('y', () => 'y');
    return 'middle done';
  },
  { compensations: { ...undo('x'), ...undo('y') } },
);
const nestedParent = workflow(
  'nested-parent',
  async (ctx: WorkflowContext) => {
    await ctx.step.run('a', () => 'a');
    await ctx.runChild('c', 'middle-child', {});
    await ctx.step.run('b', () => 'b');
    await ctx.step.run('boom', () => {
      throw new Error('boom');
    });
  },
  { compensations: { ...undo('a'), ...undo('b') } },
);

// Cancel with compensate: the parent's step undone, its running child handed over and undone by a worker.
const waitingChild = workflow(
  'waiting-child',
  async (ctx: WorkflowContext) => {
    await ctx.step.run('k1', () => 'k1');
    await ctx.waitForSignal('never');
  },
  { compensations: undo('k1') },
);
const cancellableParent = workflow(
  'cancellable-parent',
  async (ctx: WorkflowContext) => {
    await ctx.step.run('p1', () => 'p1');
    await ctx.startChild('kid', 'waiting-child', {});
    await ctx.runChild('kid-waited', 'waiting-child', {});
  },
  { compensations: undo('p1') },
);

// A child whose compensation fails until the test lets it succeed: the parent ends partial_rollback.
let childUndoFails = true;
const fragileChild = workflow('fragile-child', async (ctx: WorkflowContext) => ctx.step.run('x', () => 'x'), {
  compensations: {
    x: async (_output: unknown, c: { runId: string }) => {
      if (childUndoFails) throw new Error('the vendor is down');
      await logUndo(c.runId, 'x');
    },
  },
});
const fragileParent = workflow(
  'fragile-parent',
  async (ctx: WorkflowContext) => {
    await ctx.step.run('a', () => 'a');
    await ctx.runChild('c', 'fragile-child', {});
    await ctx.step.run('boom', () => {
      throw new Error('boom');
    });
  },
  { compensations: undo('a') },
);

const WORKFLOWS = [
  fragileChild,
  fragileParent,
  doubler,
  failingChild,
  gatedChild,
  parentOfDoubler,
  parentOfFailing,
  starter,
  parentOfGated,
  grandchild,
  middleChild,
  nestedParent,
  waitingChild,
  cancellableParent,
];

function startApp(duraflow: DuraflowModuleOptions = {}): Promise<TestingModule> {
  return bed.start({ duraflow: { ...duraflow, workflows: WORKFLOWS, worker: { shutdownTimeoutMs: 100, ...duraflow.worker } } });
}

async function undoLog(): Promise<string[]> {
  const { rows } = await bed.db.client.query(`SELECT step_key FROM compensation_log ORDER BY n`);
  return rows.map((row) => row.step_key);
}

describe('child workflows', () => {
  beforeAll(async () => {
    await bed.db.client.query(`CREATE TABLE compensation_log (n serial PRIMARY KEY, task_id uuid, step_key text)`);
  });
  beforeEach(async () => {
    await bed.db.client.query(`TRUNCATE compensation_log`);
    childGate = new Gate();
  });

  it('runChild returns the child’s output; the parent waits holding no slot (one slot runs both) and lists its child', async () => {
    const app = await startApp({ worker: { concurrency: 1, pollIntervalMs: 60_000 } });
    const workflows = app.get(WorkflowService);
    const parent = await workflows.submit('parent-of-doubler', { n: 21 });

    const done = await workflows.waitFor(parent.id, { timeoutMs: 10_000 });

    expect(done).toMatchObject({ status: 'completed', output: { doubled: 42 } });
    const children = await workflows.getChildren(parent.id);
    expect(children).toHaveLength(1);
    expect(children[0]).toMatchObject({
      workflowName: 'doubler',
      status: 'completed',
      parentTaskId: parent.id,
      parentStepKey: 'double-it',
    });
    expect(await bed.rows.step(parent.id, 'double-it')).toMatchObject({ kind: 'child', status: 'completed', output: 42 });
    expect(app.get(WorkerService).stats()).toMatchObject({ suspended: 1, completed: 2 });
  });

  it('runChild throws ChildWorkflowFailedError carrying the child’s error when the child fails', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const parent = await workflows.submit('parent-of-failing');

    const done = await workflows.waitFor(parent.id, { timeoutMs: 10_000 });

    const [child] = await workflows.getChildren(parent.id);
    expect(child.status).toBe(TaskStatus.FAILED);
    expect(done.output).toMatchObject({
      code: 'CHILD_WORKFLOW_FAILED',
      status: 'failed',
      childTaskId: child.id,
      childError: { message: 'no stock', code: 'OUT_OF_STOCK' },
    });
  });

  it('startChild starts each child once per key, across the replays of the parent', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const parent = await workflows.submit('starter');

    const done = await workflows.waitFor(parent.id, { timeoutMs: 10_000 });

    const children = await workflows.getChildren(parent.id);
    expect(children.map((child) => child.id)).toEqual([
      (done.output as { first: string }).first,
      (done.output as { second: string }).second,
    ]);
    expect(children.map((child) => child.parentStepKey)).toEqual(['kid', 'kid-2']);
    expect(await bed.rows.count('agent_tasks', `parent_task_id = $1`, [parent.id])).toBe(2);
  });

  it('rolls back a completed child at its place in the parent’s LIFO order, its own child included (nested sagas)', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const parent = await workflows.submit('nested-parent');

    const done = await workflows.waitFor(parent.id, { timeoutMs: 15_000 });

    expect(done.status).toBe(TaskStatus.ROLLED_BACK);
    expect(await undoLog()).toEqual(['b', 'y', 'z', 'x', 'a']);
    const [child] = await workflows.getChildren(parent.id);
    expect(child.status).toBe(TaskStatus.COMPLETED);
    expect(await bed.rows.compensatedStepKeys(child.id)).toEqual(['y', 'g', 'x']);
    expect(await bed.rows.compensatedStepKeys(parent.id)).toEqual(['b', 'c', 'a']);
  });

  it('sends a failed child compensation to the dead-letter queue; the parent’s entry resolves once the child’s is retried', async () => {
    childUndoFails = true;
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const saga = app.get(SagaService);
    const parent = await workflows.submit('fragile-parent');

    const done = await workflows.waitFor(parent.id, { timeoutMs: 15_000 });

    expect(done.status).toBe(TaskStatus.PARTIAL_ROLLBACK);
    expect(await undoLog()).toEqual(['a']);
    const [child] = await workflows.getChildren(parent.id);
    const [childEntry] = (await saga.listDeadLetters({ taskId: child.id })).items;
    const [parentEntry] = (await saga.listDeadLetters({ taskId: parent.id })).items;
    expect(childEntry).toBeDefined();
    expect(parentEntry).toBeDefined();

    const early = await saga.retryDeadLetter(parentEntry.id);
    expect(early).toMatchObject({ outcome: 'failed', deadLetter: { retryCount: 1 } });
    expect(JSON.stringify(early.deadLetter?.error)).toContain(child.id);

    childUndoFails = false;
    expect(await saga.retryDeadLetter(childEntry.id)).toMatchObject({ outcome: 'compensated' });
    const resolved = await saga.retryDeadLetter(parentEntry.id);

    expect(resolved).toMatchObject({ outcome: 'compensated', task: { status: 'rolled_back' } });
    expect(await undoLog()).toEqual(['a', 'x']);
    expect(await bed.rows.compensatedStepKeys(parent.id)).toEqual(['a', 'c']);
  });

  it('cancels the unfinished children with their parent', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const parent = await workflows.submit('cancellable-parent');
    await eventually('both children wait', async () => (await workflows.getChildren(parent.id)).length === 2);
    const children = await workflows.getChildren(parent.id);
    await eventually('the children wait', async () => {
      const rows = await Promise.all(children.map((child) => bed.rows.task(child.id)));
      return rows.every((row) => row.status === 'pending' && row.started_at !== null);
    });

    await workflows.cancel(parent.id);

    for (const child of children) expect(await bed.rows.task(child.id)).toMatchObject({ status: 'cancelled' });
    expect(await undoLog()).toEqual([]);
  });

  it('with compensate, undoes the parent’s steps and hands its unfinished children to the workers for their own rollback', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const parent = await workflows.submit('cancellable-parent');
    await eventually('both children ran their step', async () => {
      const children = await workflows.getChildren(parent.id);
      if (children.length < 2) return false;
      return (await Promise.all(children.map((child) => bed.rows.completedStepKeys(child.id)))).every((keys) => keys.includes('k1'));
    });

    const cancelled = await workflows.cancel(parent.id, { compensate: true });

    expect(cancelled.status).toBe(TaskStatus.CANCELLED);
    const children = await workflows.getChildren(parent.id);
    for (const child of children) {
      const ended = await workflows.waitFor(child.id, { timeoutMs: 10_000 });
      expect(ended.status).toBe(TaskStatus.CANCELLED);
      expect(await bed.rows.compensatedStepKeys(child.id)).toEqual(['k1']);
    }
    expect((await undoLog()).sort()).toEqual(['k1', 'k1', 'p1']);
  });

  it('leaves a cancelled parent cancelled when its child finishes at the same moment', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const parent = await workflows.submit('parent-of-gated');
    await childGate.reached.promise;
    await eventually('the parent waits', async () => (await bed.rows.task(parent.id)).status === 'pending');
    const [child] = await workflows.getChildren(parent.id);

    childGate.open();
    const [cancelled] = await Promise.all([workflows.cancel(parent.id), workflows.waitFor(child.id, { timeoutMs: 10_000 })]);

    expect(cancelled.status).toBe(TaskStatus.CANCELLED);
    const ended = await bed.rows.task(child.id);
    expect(['completed', 'cancelled']).toContain(ended.status);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await bed.rows.task(parent.id)).toMatchObject({ status: 'cancelled' });
    expect(await bed.rows.step(parent.id, 'gated')).toMatchObject({ status: 'waiting' });
    console.log(`child finishing while its parent is cancelled: the child ended ${ended.status}`);
  });
});
