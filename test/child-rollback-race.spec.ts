import { Client } from 'pg';
import { TaskStatus, WorkflowContext, WorkflowService, workflow } from '@duraflow/nestjs';
import { TaskTransitions } from '../libs/duraflow/src/persistence/lifecycle/task-transitions';
import { Gate } from './fixtures/steps/gate';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * A child that finishes while its parent's rollback reaches it. The parent's rollback reads the
 * child as running and hands it over for its own rollback (a cancel with compensation); if the
 * child's completion commits between that read and the cancel, the cancel finds a finished child
 * and moves nothing. The child's completed steps must then be undone by the parent's rollback,
 * as for any completed child: never reported undone while its compensations never ran.
 *
 * The race is made to happen, not hoped for: the test holds FOR SHARE on the child's row, so the
 * child's completion and then the parent's cancel queue behind it, in that order (each seen in
 * pg_stat_activity), and lets both go.
 */

const bed = useTestBed();
let childGate = new Gate();
let parentGate = new Gate();
let undoGate = new Gate();

async function logUndo(taskId: string, stepKey: string): Promise<void> {
  await bed.db.client.query(`INSERT INTO compensation_log (task_id, step_key) VALUES ($1, $2)`, [taskId, stepKey]);
}

const undo = (key: string) => ({ [key]: async (_output: unknown, c: { runId: string }) => logUndo(c.runId, key) });

const racingChild = workflow(
  'racing-child',
  async (ctx: WorkflowContext) => {
    await ctx.step.run('c1', () => 'c1');
    await ctx.step.run('c-gate', (step) => childGate.wait(step.signal));
    return 'child done';
  },
  { compensations: undo('c1') },
);

const racingParent = workflow(
  'racing-parent',
  async (ctx: WorkflowContext) => {
    await ctx.step.run('p1', () => 'p1');
    await ctx.startChild('kid', 'racing-child', {});
    await ctx.step.run('p-gate', (step) => parentGate.wait(step.signal));
    await ctx.step.run('boom', () => {
      throw new Error('boom');
    });
  },
  { compensations: undo('p1') },
);

// A child whose compensation waits at a gate, so the test can act while its own rollback runs.
const slowUndoChild = workflow(
  'slow-undo-child',
  async (ctx: WorkflowContext) => {
    await ctx.step.run('k', () => 'k');
    await ctx.waitForSignal('never');
  },
  {
    compensations: {
      k: async (_output: unknown, c: { runId: string; signal: AbortSignal }) => {
        await undoGate.wait(c.signal);
        await logUndo(c.runId, 'k');
      },
    },
  },
);

const waitingParent = workflow(
  'waiting-parent',
  async (ctx: WorkflowContext) => {
    await ctx.step.run('p1', () => 'p1');
    await ctx.startChild('kid', 'slow-undo-child', {});
    await ctx.waitForSignal('never');
  },
  { compensations: undo('p1') },
);

/** The statements of the test's database waiting for a lock whose text contains `marker`. */
async function lockWaiters(marker: string): Promise<number> {
  const { rows } = await bed.db.client.query(
    `SELECT count(*)::int AS n FROM pg_stat_activity
     WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`,
    [marker],
  );
  return rows[0].n;
}

async function undoLog(): Promise<string[]> {
  const { rows } = await bed.db.client.query(`SELECT step_key FROM compensation_log ORDER BY n`);
  return rows.map((row) => row.step_key);
}

describe('a child that finishes while its parent rolls back', () => {
  beforeAll(async () => {
    await bed.db.client.query(`CREATE TABLE compensation_log (n serial PRIMARY KEY, task_id uuid, step_key text)`);
  });
  beforeEach(async () => {
    await bed.db.client.query(`TRUNCATE compensation_log`);
    childGate = new Gate();
    parentGate = new Gate();
    undoGate = new Gate();
  });

  it('undoes the child’s steps when its completion lands between the rollback’s read and its cancel', async () => {
    // No heartbeat or reaper pass may queue on the locked row meanwhile: only the two statements of the race.
    const app = await bed.start({
      duraflow: { workflows: [racingChild, racingParent], heartbeatIntervalMs: 60_000, reaper: { enabled: false } },
    });
    const workflows = app.get(WorkflowService);
    const parent = await workflows.submit('racing-parent');
    await Promise.all([childGate.reached.promise, parentGate.reached.promise]);
    const [child] = await workflows.getChildren(parent.id);

    const holder = bed.closeLater(new Client({ connectionString: bed.db.url }), (client) => client.end());
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM agent_tasks WHERE id = $1 FOR SHARE', [child.id]);

    // The child's last step returns: its completion queues behind the lock.
    childGate.open();
    await eventually('the child’s completion waits for the row', async () => (await lockWaiters('$3::jsonb[]')) === 1);
    // The parent fails: its rollback reads the child (still running) and its cancel queues behind the completion.
    parentGate.open();
    await eventually('the rollback’s cancel waits for the row', async () => (await lockWaiters('WITH RECURSIVE tree')) === 1);
    await holder.query('COMMIT');

    const done = await workflows.waitFor(parent.id, { timeoutMs: 15_000 });
    expect(done.status).toBe(TaskStatus.ROLLED_BACK);
    expect(await bed.rows.task(child.id)).toMatchObject({ status: 'completed' });
    expect(await undoLog()).toEqual(['c1', 'p1']);
    expect(await bed.rows.compensatedStepKeys(child.id)).toEqual(['c1']);
    expect(await bed.rows.compensatedStepKeys(parent.id)).toEqual(['kid', 'p1']);
  });

  it('leaves a child whose own rollback runs to it: handed over once, its compensation runs once', async () => {
    const app = await bed.start({ duraflow: { workflows: [slowUndoChild, waitingParent] } });
    const workflows = app.get(WorkflowService);
    const parent = await workflows.submit('waiting-parent');
    await eventually('the parent and its child wait', async () => {
      const [child] = await workflows.getChildren(parent.id);
      const rows = child ? await Promise.all([bed.rows.task(parent.id), bed.rows.task(child.id)]) : [];
      return rows.length === 2 && rows.every((row) => row.status === 'pending' && row.started_at !== null);
    });
    const [child] = await workflows.getChildren(parent.id);

    // The parent's rollback hands the child over; a worker claims it and its compensation starts.
    const cancelled = workflows.cancel(parent.id, { compensate: true });
    await undoGate.reached.promise;
    expect(await bed.rows.task(child.id)).toMatchObject({ status: 'running', rollback_reason: 'cancelled' });
    // What a cancel with compensation does to the tree last, while the child's own rollback runs.
    expect(await app.get(TaskTransitions).cancelDescendants([parent.id], { includeRoots: false, compensate: true })).toEqual([]);
    undoGate.open();

    expect(await cancelled).toMatchObject({ status: TaskStatus.CANCELLED });
    expect(await workflows.waitFor(child.id, { timeoutMs: 10_000 })).toMatchObject({ status: TaskStatus.CANCELLED });
    expect((await undoLog()).sort()).toEqual(['k', 'p1']);
    expect(await bed.rows.compensatedStepKeys(child.id)).toEqual(['k']);
  });
});
