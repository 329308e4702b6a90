import { TestingModule } from '@nestjs/testing';
import {
  DuraflowModuleOptions,
  FunctionalWorkflowDefinition,
  TaskAlreadyFinishedError,
  TaskStatus,
  WorkerService,
  WorkflowContext,
  WorkflowService,
  workflow,
} from '@duraflow/nestjs';
import { createDuraflowTestEnv } from '@duraflow/nestjs/testing';
import { Gate } from './fixtures/steps/gate';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * ctx.sleep / ctx.sleepUntil against PostgreSQL: memoized under their key, the task `pending`
 * with `scheduled_at` at its wake-up while it sleeps (no slot, no worker, no heartbeat), woken by
 * the worker's own timer, on any worker, without running its completed steps again.
 */

const bed = useTestBed();
/** How many times each step body ran, per task. */
const ran = new Map<string, number>();
const count = (taskId: string, key: string) => ran.set(`${taskId}/${key}`, (ran.get(`${taskId}/${key}`) ?? 0) + 1);
const runs = (taskId: string, key: string) => ran.get(`${taskId}/${key}`) ?? 0;

const napper = workflow('napper', async (ctx: WorkflowContext<{ ms: number }>) => {
  const before = await ctx.step.run('before', () => {
    count(ctx.runId, 'before');
    return { at: Date.now() };
  });
  await ctx.sleep('nap', ctx.input.ms);
  const after = await ctx.step.run('after', () => {
    count(ctx.runId, 'after');
    return { at: Date.now() };
  });
  return { before: before.at, after: after.at };
});

const quick = workflow('quick', async (ctx: WorkflowContext) => ctx.step.run('only', () => 'done'));

const untilPast = workflow('until-past', async (ctx: WorkflowContext) => {
  await ctx.sleepUntil('long-ago', new Date('2020-01-01T00:00:00Z'));
  return 'awake';
});

const twice = workflow('sleep-key-twice', async (ctx: WorkflowContext) => {
  await ctx.sleep('k', 0);
  await ctx.step.run('k', () => 1);
});

const badSleep = workflow('bad-sleep', async (ctx: WorkflowContext) => {
  await ctx.sleep('nan', Number.NaN);
});

let beforeSleepGate = new Gate();
/** Stops between its step and its sleep (outside any step) until the test opens the gate. */
const gatedNapper = workflow('gated-napper', async (ctx: WorkflowContext) => {
  await ctx.step.run('before', () => {
    count(ctx.runId, 'before');
    return 1;
  });
  if (ctx.attempt === 1) await beforeSleepGate.wait();
  await ctx.sleep('nap', 50);
  return 'done';
});

const WORKFLOWS = [napper, quick, untilPast, twice, badSleep, gatedNapper];

function startApp(duraflow: DuraflowModuleOptions = {}, workflows: FunctionalWorkflowDefinition[] = WORKFLOWS): Promise<TestingModule> {
  return bed.start({ duraflow: { ...duraflow, workflows, worker: { shutdownTimeoutMs: 100, ...duraflow.worker } } });
}

/** The status of the task's `nap` row, undefined before it exists. */
async function napState(taskId: string): Promise<string | undefined> {
  return (await bed.rows.steps(taskId)).find((step) => step.step_key === 'nap')?.status;
}

describe('durable sleep', () => {
  it('gives the slot back while it sleeps: a worker of concurrency 1 runs another task meanwhile', async () => {
    const app = await startApp({ worker: { concurrency: 1, pollIntervalMs: 60_000 } });
    const workflows = app.get(WorkflowService);
    const sleeper = await workflows.submit('napper', { ms: 1_500 });
    await eventually('the sleeper suspended', async () => (await napState(sleeper.id)) === 'waiting');

    const other = await workflows.submit('quick');
    const done = await workflows.waitFor(other.id, { timeoutMs: 10_000 });

    expect(done.status).toBe(TaskStatus.COMPLETED);
    const sleeping = await bed.rows.task(sleeper.id);
    expect(sleeping).toMatchObject({ status: 'pending', worker_id: null, heartbeat_at: null, claim_token: null });
    expect(new Date(sleeping.scheduled_at).getTime()).toBeGreaterThan(Date.now());
    // The worker counts an outcome once its statement committed, which waitFor may see first.
    await eventually('the worker counted the completion', () => app.get(WorkerService).stats(), {
      until: (stats) => stats.completed === 1,
    });
    expect(app.get(WorkerService).stats()).toMatchObject({ suspended: 1, completed: 1 });
  });

  it('wakes by its own timer (not the poll), runs the steps after it, and never runs the steps before it again', async () => {
    const app = await startApp({ worker: { pollIntervalMs: 60_000 } });
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('napper', { ms: 300 });

    const done = await workflows.waitFor(task.id, { timeoutMs: 10_000 });

    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(runs(task.id, 'before')).toBe(1);
    expect(runs(task.id, 'after')).toBe(1);
    const nap = await bed.rows.step(task.id, 'nap');
    expect(nap).toMatchObject({ kind: 'sleep', status: 'completed' });
    const lateness = new Date(nap.completed_at).getTime() - new Date(nap.wake_at).getTime();
    const output = done.output as { before: number; after: number };
    expect(output.after - output.before).toBeGreaterThanOrEqual(300);
    console.log(`sleep of 300 ms: woke ${lateness} ms after its wake-up time (poll interval 60 s)`);
  });

  it('wakes on another worker when the one that suspended it is gone, without running completed steps again', async () => {
    const first = await startApp({ worker: { pollIntervalMs: 60_000 } });
    const task = await first.get(WorkflowService).submit('napper', { ms: 400 });
    await eventually('the task suspended', async () => (await napState(task.id)) === 'waiting');
    await bed.close(first);

    const second = await startApp({ worker: { pollIntervalMs: 50 } });
    const done = await second.get(WorkflowService).waitFor(task.id, { timeoutMs: 10_000 });

    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(runs(task.id, 'before')).toBe(1);
    expect(runs(task.id, 'after')).toBe(1);
    expect(await bed.rows.completedStepKeys(task.id)).toEqual(['before', 'nap', 'after']);
  });

  it('returns at once from a sleepUntil in the past, and records it', async () => {
    const app = await startApp();
    const task = await app.get(WorkflowService).submit('until-past');
    const done = await app.get(WorkflowService).waitFor(task.id, { timeoutMs: 10_000 });
    expect(done).toMatchObject({ status: 'completed', output: 'awake' });
    expect(await bed.rows.step(task.id, 'long-ago')).toMatchObject({ kind: 'sleep', status: 'completed' });
  });

  it('shares the step keys: a step under a sleep key is the duplicate-key error', async () => {
    const app = await startApp();
    const task = await app.get(WorkflowService).submit('sleep-key-twice');
    const done = await app.get(WorkflowService).waitFor(task.id, { timeoutMs: 10_000 });
    expect(done.status).toBe(TaskStatus.FAILED);
    expect(done.error).toMatchObject({ code: 'DUPLICATE_STEP_KEY' });
  });

  it('fails the task with a typed error for a sleep of NaN ms, recording no sleep', async () => {
    const app = await startApp();
    const task = await app.get(WorkflowService).submit('bad-sleep');
    const done = await app.get(WorkflowService).waitFor(task.id, { timeoutMs: 10_000 });
    expect(done.error).toMatchObject({ code: 'INVALID_PRIMITIVE_CALL' });
    expect(await bed.rows.steps(task.id)).toEqual([]);
  });

  it('settles a cancel racing the wake-up exactly one way: cancelled (the run records nothing after), or completed first', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const outcomes: string[] = [];
    for (let round = 0; round < 10; round++) {
      const task = await workflows.submit('napper', { ms: 100 });
      await eventually('the task suspended', async () => (await napState(task.id)) === 'waiting');
      await new Promise((resolve) => setTimeout(resolve, 80 + round * 5));
      const cancel = await workflows.cancel(task.id).then(
        (cancelled) => cancelled.status,
        (error: unknown) => {
          if (error instanceof TaskAlreadyFinishedError) return 'already finished';
          throw error;
        },
      );
      const done = await workflows.waitFor(task.id, { timeoutMs: 10_000 });
      await new Promise((resolve) => setTimeout(resolve, 50));
      const row = await bed.rows.task(task.id);
      if (cancel === TaskStatus.CANCELLED) {
        expect(row.status).toBe('cancelled');
        expect(row.output).toBeNull();
      } else {
        expect(cancel).toBe('already finished');
        expect(done.status).toBe(TaskStatus.COMPLETED);
      }
      outcomes.push(`${cancel}${cancel === TaskStatus.CANCELLED && runs(task.id, 'after') ? ' (woke first)' : ''}`);
    }
    console.log(`cancel vs wake-up, 10 rounds: ${outcomes.join(', ')}`);
  });

  it('records nothing for a sleep reached by a run whose task was reaped meanwhile; the next run sleeps and completes', async () => {
    beforeSleepGate = new Gate();
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('gated-napper');
    await beforeSleepGate.reached.promise;
    // What the reaper does to a task whose heartbeat went stale: back to pending, a retry counted, the claim gone.
    await bed.db.client.query(
      `UPDATE agent_tasks SET status = 'pending', worker_id = NULL, claim_token = NULL, retry_count = retry_count + 1 WHERE id = $1`,
      [task.id],
    );

    beforeSleepGate.open();
    const done = await workflows.waitFor(task.id, { timeoutMs: 10_000 });

    expect(done).toMatchObject({ status: 'completed', output: 'done', retryCount: 1 });
    expect(runs(task.id, 'before')).toBe(1);
    expect((await bed.rows.steps(task.id)).map((step) => [step.step_key, step.status])).toEqual([
      ['before', 'completed'],
      ['nap', 'completed'],
    ]);
    expect(app.get(WorkerService).stats()).toMatchObject({ stopped: 1 });
  });

  it('cancels a sleeping task at once; it never wakes, however long after (testing kit: a day passes)', async () => {
    const env = await createDuraflowTestEnv({ options: { workflows: [napper] } });
    try {
      const task = await env.workflows.submit('napper', { ms: 3_600_000 });
      await env.runUntilIdle();
      expect((await env.getSteps(task.id)).find((step) => step.stepKey === 'nap')?.status).toBe('waiting');

      const cancelled = await env.workflows.cancel(task.id);

      expect(cancelled.status).toBe(TaskStatus.CANCELLED);
      await env.advanceTime('1d');
      expect((await env.workflows.get(task.id))!.status).toBe(TaskStatus.CANCELLED);
      expect(runs(task.id, 'after')).toBe(0);
    } finally {
      await env.close();
    }
  });
});
