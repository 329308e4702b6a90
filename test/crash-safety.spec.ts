import { TaskStatus, WorkerService, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { TaskTransitions } from '../libs/duraflow/src/persistence/lifecycle/task-transitions';
import { useTestBed } from './support/test-bed';
import { eventually, sleep } from './support/waiting';

/** A step that waits for its AbortSignal and records why it was aborted. */
function waitForAbort(aborted: unknown[]) {
  return ({ signal }: { signal: AbortSignal }) =>
    new Promise((_, reject) =>
      signal.addEventListener('abort', () => {
        aborted.push(signal.reason);
        reject(signal.reason);
      }),
    );
}

describe('Crash safety in one process (heartbeat, fencing, cancellation)', () => {
  const bed = useTestBed({ databasePerTest: true });

  it('notices within a heartbeat a cancel that sent no NOTIFY, aborts the step and starts no other', async () => {
    const aborted: unknown[] = [];
    const after: string[] = [];
    const hanging = workflow('hanging', async (ctx: WorkflowContext) => {
      await ctx.step.run('wait', waitForAbort(aborted));
      after.push('next');
      await ctx.step.run('never', () => after.push('never'));
    });
    const app = await bed.start({ duraflow: { workflows: [hanging], heartbeatIntervalMs: 100 } });
    const worker = app.get(WorkerService);
    const task = await app.get(WorkflowService).submit('hanging', {});
    await eventually('the task runs', async () => (await bed.rows.task(task.id)).status === 'running');

    // As another tool (or a LISTEN connection that is down) would: no NOTIFY reaches the worker.
    await bed.db.client.query(`UPDATE agent_tasks SET status = 'cancelled', completed_at = now() WHERE id = $1`, [task.id]);

    await eventually('the heartbeat stopped the run', () => aborted.length === 1 && worker.stats().stopped === 1);
    expect(String((aborted[0] as Error).message)).toContain('taken over');
    await sleep(300);
    expect(after).toEqual([]);
    expect(await bed.rows.task(task.id)).toMatchObject({ status: 'cancelled' });
    const { rows } = await bed.db.client.query(`SELECT step_key, status FROM step_runs WHERE task_id = $1`, [task.id]);
    expect(rows.filter((row) => row.status === 'completed')).toEqual([]);
  });

  it('fences a run whose task was reaped and re-claimed: its later checkpoints land nowhere and it stops', async () => {
    const gates = new Map<number, { open: () => void; opened: Promise<void> }>();
    for (const attempt of [1, 2]) {
      let open!: () => void;
      const opened = new Promise<void>((resolve) => (open = resolve));
      gates.set(attempt, { open, opened });
    }
    const runs: string[] = [];
    const fenced = workflow('fenced', async (ctx: WorkflowContext) => {
      const first = await ctx.step.run('first', () => {
        runs.push(`first@${ctx.attempt}`);
        return ctx.attempt;
      });
      await gates.get(ctx.attempt)?.opened; // attempt 1 "freezes" here; attempt 2 waits for the test
      await ctx.step.run('second', () => runs.push(`second@${ctx.attempt}`));
      return { first, finishedBy: ctx.attempt };
    });
    // A frozen worker: its heartbeat never lands (no timer fires for a long time), and its one
    // slot stays taken by the frozen run, so it claims nothing else.
    const frozen = await bed.start({
      duraflow: { workflows: [fenced], heartbeatIntervalMs: 3_600_000, worker: { concurrency: 1 } },
    });
    const task = await frozen.get(WorkflowService).submit('fenced', {});
    await eventually('the first run passed its first step', () => runs.includes('first@1'));
    const firstClaim = (await bed.rows.task(task.id)).claim_token;

    // Stale: the reaper re-queues it and a second worker takes it over.
    await bed.db.client.query(`UPDATE agent_tasks SET heartbeat_at = now() - interval '1 hour' WHERE id = $1`, [task.id]);
    expect(await frozen.get(TaskTransitions).reap(1_000)).toEqual([
      { id: task.id, status: TaskStatus.PENDING, retryCount: 1, workflowName: 'fenced', errorCode: null, action: 'requeue' },
    ]);
    const rescuer = await bed.start({ duraflow: { workflows: [fenced] } });
    await eventually('the rescuer claimed the task', async () => (await bed.rows.task(task.id)).status === 'running');
    expect((await bed.rows.task(task.id)).claim_token).not.toBe(firstClaim);

    // The frozen run wakes up: its step body runs, but its checkpoint lands nowhere and it stops.
    gates.get(1)!.open();
    await eventually('the frozen run stopped', () => frozen.get(WorkerService).stats().stopped === 1);
    expect(runs).toContain('second@1');
    const { rows } = await bed.db.client.query(`SELECT step_key FROM step_runs WHERE task_id = $1 ORDER BY step_key`, [task.id]);
    expect(rows).toEqual([{ step_key: 'first' }]);
    expect(await bed.rows.task(task.id)).toMatchObject({ status: 'running', retry_count: 1 });

    gates.get(2)!.open();
    const done = await rescuer.get(WorkflowService).waitFor(task.id);
    expect(done).toMatchObject({ status: TaskStatus.COMPLETED, output: { first: 1, finishedBy: 2 }, retryCount: 1 });
    expect(frozen.get(WorkerService).stats()).toMatchObject({ completed: 0, failed: 0, stopped: 1 });
    expect(runs.sort()).toEqual(['first@1', 'second@1', 'second@2']);
  });
});
