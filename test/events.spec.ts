import {
  EventTimeoutError,
  InvalidPrimitiveCallError,
  InvalidTalkKeyError,
  TaskNotFoundError,
  TaskStatus,
  WorkflowContext,
  WorkflowService,
  workflow,
} from '@duraflow/nestjs';
import { randomUUID } from 'node:crypto';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * ctx.setEvent / workflows.getEvent: the latest value per (task, key), set durably and fenced on
 * the run's claim, read by callers that wait (woken by NOTIFY) until it is set.
 */

const bed = useTestBed({ databasePerTest: true });

/** Body gates the test opens, per task: a run parks on one between two setEvents. */
const gates = new Map<string, () => void>();
const gate = (taskId: string) => new Promise<void>((resolve) => gates.set(taskId, resolve));

const progress = workflow('events-progress', async (ctx: WorkflowContext) => {
  await ctx.waitForSignal('go');
  await ctx.setEvent('progress', { done: 1, of: 2 });
  await ctx.setEvent('progress', { done: 2, of: 2 });
  await ctx.setEvent('empty', null);
  return 'ok';
});

/** Sets a then b, sleeps (the run suspends; its resumption replays the body), waits for a signal, sets c. */
const replayed = workflow('events-replayed', async (ctx: WorkflowContext) => {
  await ctx.setEvent('stage', 'a');
  await ctx.setEvent('stage', 'b');
  await ctx.sleep('nap', 10);
  await ctx.waitForSignal('go');
  await ctx.setEvent('stage', 'c');
});

const inStep = workflow('events-in-step', async (ctx: WorkflowContext) => {
  await ctx.step.run('s', () => ctx.setEvent('x', 1));
});

/** What the parked run's second setEvent did: 'set', or the error it threw. */
const zombieOutcomes = new Map<string, unknown>();
const parked = workflow('events-parked', async (ctx: WorkflowContext) => {
  await ctx.setEvent('v', 1);
  await gate(ctx.runId);
  await ctx.setEvent('v', 2).then(
    () => zombieOutcomes.set(ctx.runId, 'set'),
    (error) => zombieOutcomes.set(ctx.runId, error),
  );
});

async function startApp() {
  const app = await bed.start({
    duraflow: { workflows: [progress, replayed, inStep, parked], worker: { shutdownTimeoutMs: 100 } },
  });
  return app.get(WorkflowService);
}

describe('events', () => {
  it('getEvent waits until the run sets the event, woken by its NOTIFY, and then returns the latest value', async () => {
    const workflows = await startApp();
    const task = await workflows.submit('events-progress');
    const waiting = workflows.getEvent(task.id, 'progress', { timeoutMs: 20_000 });
    await eventually('the run waits for its signal', async () => (await workflows.get(task.id))?.status === TaskStatus.PENDING);
    await workflows.signal(task.id, 'go');
    expect(await waiting).toMatchObject({ of: 2 });
    await workflows.waitFor(task.id, { timeoutMs: 20_000 });
    expect(await workflows.getEvent(task.id, 'progress')).toEqual({ done: 2, of: 2 });
    expect(await workflows.getEvent(task.id, 'empty', { timeoutMs: 0 })).toBeNull();
  });

  it('throws EventTimeoutError past timeoutMs, TaskNotFoundError for no task, InvalidTalkKeyError for a bad key', async () => {
    const workflows = await startApp();
    const task = await workflows.submit('events-progress');
    await expect(workflows.getEvent(task.id, 'progress', { timeoutMs: 50 })).rejects.toBeInstanceOf(EventTimeoutError);
    await expect(workflows.getEvent(task.id, 'progress', { timeoutMs: 50 })).rejects.toMatchObject({ code: 'EVENT_TIMEOUT' });
    await expect(workflows.getEvent(randomUUID(), 'progress', { timeoutMs: 50 })).rejects.toBeInstanceOf(TaskNotFoundError);
    await expect(workflows.getEvent('not-a-task', 'progress')).rejects.toBeInstanceOf(TaskNotFoundError);
    await expect(workflows.getEvent(task.id, '')).rejects.toBeInstanceOf(InvalidTalkKeyError);
  });

  it('a replayed part of the run never sets an older value again', async () => {
    const workflows = await startApp();
    const task = await workflows.submit('events-replayed');
    // After the nap the run is a second run of the task: its body set 'a' then 'b' again (replayed), then waits.
    await eventually('the run waits for its signal after the nap', async () => {
      const { rows } = await bed.db.client.query(`SELECT 1 FROM step_runs WHERE task_id = $1 AND step_key LIKE 'signal:go%'`, [task.id]);
      return rows.length > 0 && (await workflows.get(task.id))?.status === TaskStatus.PENDING;
    });
    expect(await workflows.getEvent(task.id, 'stage', { timeoutMs: 0 })).toBe('b');
    const { rows } = await bed.db.client.query(`SELECT value, position FROM task_events WHERE task_id = $1`, [task.id]);
    expect(rows).toEqual([{ value: 'b', position: 2 }]);
    await workflows.signal(task.id, 'go');
    await workflows.waitFor(task.id, { timeoutMs: 20_000 });
    expect(await workflows.getEvent(task.id, 'stage')).toBe('c');
  });

  it('refuses setEvent inside a step (a call of the workflow body)', async () => {
    const workflows = await startApp();
    const task = await workflows.submit('events-in-step');
    const finished = await workflows.waitFor(task.id, { timeoutMs: 20_000 });
    expect(finished.status).toBe(TaskStatus.FAILED);
    expect(finished.error).toMatchObject({ code: new InvalidPrimitiveCallError('x', 'y').code });
    await expect(workflows.getEvent(task.id, 'x', { timeoutMs: 0 })).rejects.toBeInstanceOf(EventTimeoutError);
  });

  it('ignores a zombie run: a setEvent of a claim that no longer owns the task changes nothing', async () => {
    const workflows = await startApp();
    const task = await workflows.submit('events-parked');
    expect(await workflows.getEvent(task.id, 'v', { timeoutMs: 20_000 })).toBe(1);
    await eventually('the run is parked', () => gates.has(task.id));
    // Another claim took the task (as a reap and a new claim would): the parked run is a zombie.
    await bed.db.client.query(`UPDATE agent_tasks SET claim_token = gen_random_uuid() WHERE id = $1`, [task.id]);
    gates.get(task.id)!();
    await eventually('the zombie tried', () => zombieOutcomes.has(task.id));
    expect(zombieOutcomes.get(task.id)).toMatchObject({ code: 'RUN_ABORTED' });
    const { rows } = await bed.db.client.query(`SELECT value, position FROM task_events WHERE task_id = $1`, [task.id]);
    expect(rows).toEqual([{ value: 1, position: 1 }]);
  });

  it('deletes the events with their task (retention), and empties them with a TRUNCATE', async () => {
    const workflows = await startApp();
    const kept = await workflows.submit('events-progress');
    const gone = await workflows.submit('events-progress');
    for (const task of [kept, gone]) await workflows.signal(task.id, 'go');
    for (const task of [kept, gone]) await workflows.waitFor(task.id, { timeoutMs: 20_000 });
    await bed.db.client.query(`DELETE FROM agent_tasks WHERE id = $1`, [gone.id]);
    const count = async (id: string) =>
      (await bed.db.client.query(`SELECT count(*)::int AS n FROM task_events WHERE task_id = $1`, [id])).rows[0].n;
    expect(await count(gone.id)).toBe(0);
    expect(await count(kept.id)).toBe(2);
    await bed.db.client.query(`TRUNCATE agent_tasks CASCADE`);
    expect(await count(kept.id)).toBe(0);
  });
});
