import { TestingModule } from '@nestjs/testing';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  aesGcmCodec,
  CallbackAlreadyCompletedError,
  CallbackClosedError,
  CallbackHandle,
  CallbackNotFoundError,
  CallbackPayloadTooLargeError,
  CallbackTimeoutError,
  DuraflowModuleOptions,
  InvalidCallbackPayloadError,
  InvalidDuraflowOptionsError,
  ReservedSignalNameError,
  TaskStatus,
  WorkerService,
  WorkflowContext,
  WorkflowService,
  workflow,
} from '@duraflow/nestjs';
import { createDuraflowTestEnv } from '@duraflow/nestjs/testing';
import { resolveDuraflowOptions } from '../libs/duraflow/src/config/resolved-options';
import { effectKey } from '../libs/duraflow/src/util/effect-key';
import { SUBMIT_ONLY, useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * ctx.createCallback / ctx.waitForCallback / workflows.completeCallback against PostgreSQL: the
 * handle is memoized (a replay and a recovery return the same id and url), the waiting task holds
 * no slot, the first completion wins (also when completions race) and every refusal writes
 * nothing, a completion made while no worker runs is taken when one starts, and past its timeout
 * the wait throws CallbackTimeoutError (caught, or rolled back by the saga).
 */

const bed = useTestBed();
const SECRET = 'a-test-secret-of-at-least-32-bytes-long!';
const CALLBACKS = { baseUrl: 'https://hooks.example.com/api', secret: SECRET };
/** The handles each run of a task saw, by task id. */
const seen = new Map<string, CallbackHandle[]>();
const undone: string[] = [];

const approval = workflow('cb-approval', async (ctx: WorkflowContext<{ timeoutMs?: number }>) => {
  const cb = await ctx.createCallback('approval', { timeoutMs: ctx.input?.timeoutMs });
  seen.set(ctx.runId, [...(seen.get(ctx.runId) ?? []), cb]);
  try {
    return { body: await ctx.waitForCallback(cb) };
  } catch (error) {
    if (error instanceof CallbackTimeoutError) return { timedOut: true, code: error.code };
    throw error;
  }
});

const reserving = workflow(
  'cb-reserving',
  async (ctx: WorkflowContext) => {
    await ctx.step.run('reserve', () => ({ reservation: 'r-1' }));
    const cb = await ctx.createCallback('confirm', { timeoutMs: 100 });
    await ctx.waitForCallback(cb);
    return 'confirmed';
  },
  { compensations: { reserve: async () => void undone.push('reserve') } },
);

const opensOnly = workflow('cb-opens-only', async (ctx: WorkflowContext) => {
  const cb = await ctx.createCallback('never-waited');
  return { id: cb.id };
});

const WORKFLOWS = [approval, reserving, opensOnly];

function startApp(options: DuraflowModuleOptions = {}): Promise<TestingModule> {
  return bed.start({
    duraflow: { callbacks: CALLBACKS, ...options, workflows: WORKFLOWS, worker: { shutdownTimeoutMs: 100, ...options.worker } },
  });
}

async function callbackRows(taskId: string) {
  return (await bed.db.client.query(`SELECT * FROM task_callbacks WHERE task_id = $1 ORDER BY created_at`, [taskId])).rows;
}

async function waitingForCallback(taskId: string): Promise<boolean> {
  return (await bed.rows.steps(taskId)).some((step) => step.kind === 'signal' && step.status === 'waiting');
}

/** What a refusal must leave as it was: the callback's row, the task's signals, the task's status. */
async function snapshot(taskId: string) {
  const signals = (await bed.db.client.query(`SELECT id, consumed_at FROM task_signals WHERE task_id = $1 ORDER BY id`, [taskId])).rows;
  return { callbacks: await callbackRows(taskId), signals, status: (await bed.rows.task(taskId)).status };
}

describe('callbacks', () => {
  it('opens a callback with a signed url, waits for it holding no slot, and resumes with the payload of completeCallback', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('cb-approval', {});
    await eventually('the task waits for its callback', () => waitingForCallback(task.id));
    expect(await bed.rows.task(task.id)).toMatchObject({ status: 'pending', worker_id: null });
    const [cb] = seen.get(task.id)!;
    expect(cb.url).toMatch(/^https:\/\/hooks\.example\.com\/api\/duraflow\/callbacks\/[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    expect(cb).toMatchObject({ key: 'approval', expiresAt: null });
    expect(await callbackRows(task.id)).toEqual([expect.objectContaining({ id: cb.id, key: 'approval', status: 'open', payload: null })]);

    const receipt = await workflows.completeCallback(cb.id, { approved: true });

    expect(receipt).toEqual({ callbackId: cb.id, taskId: task.id });
    expect(await workflows.waitFor(task.id, { timeoutMs: 10_000 })).toMatchObject({
      status: 'completed',
      output: { body: { approved: true } },
    });
    expect(await callbackRows(task.id)).toEqual([
      expect.objectContaining({ status: 'completed', payload: { approved: true }, completed_at: expect.any(Date) }),
    ]);
    expect(await workflows.listCallbacks(task.id)).toEqual([
      expect.objectContaining({ id: cb.id, status: 'completed', url: null, payload: { approved: true } }),
    ]);
  });

  it('returns the same id and url on every replay, and after the worker that opened it stopped (completed while no worker runs)', async () => {
    const first = await startApp();
    const task = await first.get(WorkflowService).submit('cb-approval', { timeoutMs: 3_600_000 });
    await eventually('the task waits for its callback', () => waitingForCallback(task.id));
    await first.close();

    const submitter = await startApp(SUBMIT_ONLY);
    await submitter.get(WorkflowService).completeCallback(seen.get(task.id)![0].id, 'from-no-worker');
    expect(await bed.rows.task(task.id)).toMatchObject({ status: 'pending' });

    const second = await startApp();
    const done = await second.get(WorkflowService).waitFor(task.id, { timeoutMs: 10_000 });

    expect(done).toMatchObject({ status: 'completed', output: { body: 'from-no-worker' } });
    const handles = seen.get(task.id)!;
    expect(handles.length).toBeGreaterThanOrEqual(2);
    for (const handle of handles) expect(handle).toEqual(handles[0]);
    expect(handles[0].expiresAt).toEqual(expect.any(String));
    expect(await callbackRows(task.id)).toHaveLength(1);
  });

  it('opens the same callback, with its first expiry, when its step runs again after a crash between the row and the checkpoint', async () => {
    const submitter = await startApp(SUBMIT_ONLY);
    const task = await submitter.get(WorkflowService).submit('cb-approval', { timeoutMs: 60_000 });
    const id = effectKey(task.id, 'callback:approval');
    // What a run that died after opening the callback, before its step's checkpoint, left behind.
    await bed.db.client.query(
      `INSERT INTO task_callbacks (id, task_id, key, expires_at) VALUES ($1, $2, 'approval', '2099-01-01T00:00:00Z')`,
      [id, task.id],
    );

    await startApp();
    await eventually('the task waits for its callback', () => waitingForCallback(task.id));

    expect(seen.get(task.id)).toEqual([expect.objectContaining({ id, expiresAt: '2099-01-01T00:00:00.000Z' })]);
    expect(await callbackRows(task.id)).toHaveLength(1);
    const wait = (await bed.rows.steps(task.id)).find((step) => step.kind === 'signal');
    expect(wait!.wake_at).toEqual(new Date('2099-01-01T00:00:00Z'));
  });

  it('lets exactly one of many racing completions win; the others are told it was completed already', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('cb-approval', {});
    await eventually('the task waits for its callback', () => waitingForCallback(task.id));
    const { id } = seen.get(task.id)![0];

    const outcomes = await Promise.allSettled(Array.from({ length: 8 }, (_, n) => workflows.completeCallback(id, { n })));

    const won = outcomes.filter((outcome) => outcome.status === 'fulfilled');
    expect(won).toHaveLength(1);
    for (const outcome of outcomes.filter((o) => o.status === 'rejected')) {
      expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(CallbackAlreadyCompletedError);
    }
    const done = await workflows.waitFor(task.id, { timeoutMs: 10_000 });
    const [row] = await callbackRows(task.id);
    expect(done.output).toEqual({ body: row.payload });
    const signals = (await bed.db.client.query(`SELECT count(*)::int AS n FROM task_signals WHERE task_id = $1`, [task.id])).rows;
    expect(signals[0].n).toBe(1);
  });

  it('refuses a repeat, an unknown id, an expired callback, a finished task and a bad payload, writing nothing', async () => {
    const app = await startApp({ callbacks: { ...CALLBACKS, maxBodyBytes: 64 } });
    const workflows = app.get(WorkflowService);
    const waiting = await workflows.submit('cb-approval', {});
    await eventually('the task waits for its callback', () => waitingForCallback(waiting.id));
    const open = seen.get(waiting.id)![0];
    const before = await snapshot(waiting.id);

    await expect(workflows.completeCallback(randomUUID(), 1)).rejects.toBeInstanceOf(CallbackNotFoundError);
    await expect(workflows.completeCallback('not-a-uuid', 1)).rejects.toMatchObject({ code: 'CALLBACK_NOT_FOUND' });
    await expect(workflows.completeCallback(open.id, 'x'.repeat(100))).rejects.toBeInstanceOf(CallbackPayloadTooLargeError);
    await expect(workflows.completeCallback(open.id, { n: BigInt(1) })).rejects.toBeInstanceOf(InvalidCallbackPayloadError);
    expect(await snapshot(waiting.id)).toEqual(before);

    await workflows.completeCallback(open.id, 'first');
    await workflows.waitFor(waiting.id, { timeoutMs: 10_000 });
    const completed = await snapshot(waiting.id);
    await expect(workflows.completeCallback(open.id, 'second')).rejects.toBeInstanceOf(CallbackAlreadyCompletedError);
    expect(await snapshot(waiting.id)).toEqual(completed);

    // A callback whose task finished without waiting for it.
    const finished = await workflows.submit('cb-opens-only');
    const { output } = await workflows.waitFor(finished.id, { timeoutMs: 10_000 });
    const finishedBefore = await snapshot(finished.id);
    await expect(workflows.completeCallback((output as { id: string }).id, 1)).rejects.toMatchObject({
      code: 'CALLBACK_CLOSED',
      reason: 'task-finished',
    });
    expect(await snapshot(finished.id)).toEqual(finishedBefore);
  });

  it('throws CallbackTimeoutError past the timeout (the workflow catches it), marks the callback expired and refuses it then', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('cb-approval', { timeoutMs: 150 });

    const done = await workflows.waitFor(task.id, { timeoutMs: 10_000 });

    expect(done).toMatchObject({ status: 'completed', output: { timedOut: true, code: 'CALLBACK_TIMEOUT' } });
    const [row] = await callbackRows(task.id);
    expect(row).toMatchObject({ status: 'expired', payload: null });
    await expect(workflows.completeCallback(row.id, 'late')).rejects.toBeInstanceOf(CallbackClosedError);
    await expect(workflows.completeCallback(row.id, 'late')).rejects.toMatchObject({ reason: 'expired' });
    expect((await callbackRows(task.id))[0]).toEqual(row);
  });

  it('times out on the engine clock of the testing kit: not before advanceTime passes the expiry, refused (410) after it', async () => {
    const env = await createDuraflowTestEnv({ options: { workflows: WORKFLOWS, callbacks: CALLBACKS } });
    try {
      const task = await env.workflows.submit('cb-approval', { timeoutMs: 86_400_000 });
      await env.runUntilIdle();
      await env.advanceTime('23h');
      expect((await env.workflows.get(task.id))!.status).toBe(TaskStatus.PENDING);

      await env.advanceTime('2h');

      expect((await env.workflows.get(task.id))!).toMatchObject({ status: 'completed', output: { timedOut: true } });
      await expect(env.workflows.completeCallback(seen.get(task.id)![0].id, 'late')).rejects.toMatchObject({ reason: 'expired' });
    } finally {
      await env.close();
    }
  });

  it('rolls the task back when the timeout is not caught (the saga undoes the completed steps)', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('cb-reserving');

    const done = await workflows.waitFor(task.id, { timeoutMs: 10_000 });

    expect(done.status).toBe(TaskStatus.ROLLED_BACK);
    expect(done.error).toMatchObject({ code: 'CALLBACK_TIMEOUT' });
    expect(await bed.rows.compensatedStepKeys(task.id)).toEqual(['reserve']);
    expect(undone).toContain('reserve');
  });

  it('stores the payload through the codec: not in plaintext in PostgreSQL, the run gets it decoded', async () => {
    const app = await startApp({ codec: aesGcmCodec({ keys: { k1: randomBytes(32) }, current: 'k1' }) });
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('cb-approval', {});
    await eventually('the task waits for its callback', () => waitingForCallback(task.id));

    await workflows.completeCallback(seen.get(task.id)![0].id, { secretWord: 'swordfish' });

    expect(await workflows.waitFor(task.id, { timeoutMs: 10_000 })).toMatchObject({ output: { body: { secretWord: 'swordfish' } } });
    const stored = await bed.db.client.query(
      `SELECT (SELECT string_agg(payload::text, '') FROM task_callbacks WHERE task_id = $1) AS callbacks,
              (SELECT string_agg(payload::text, '') FROM task_signals WHERE task_id = $1) AS signals,
              (SELECT string_agg(output::text, '') FROM step_runs WHERE task_id = $1) AS steps`,
      [task.id],
    );
    for (const text of Object.values(stored.rows[0])) expect(text).not.toContain('swordfish');
    expect(await workflows.listCallbacks(task.id)).toEqual([expect.objectContaining({ payload: { secretWord: 'swordfish' } })]);
  });

  it('keeps the signal name of callbacks to itself: workflows.signal refuses it', async () => {
    const app = await startApp(SUBMIT_ONLY);
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('cb-approval', {});

    await expect(workflows.signal(task.id, `duraflow:callback:${randomUUID()}`, 1)).rejects.toBeInstanceOf(ReservedSignalNameError);
    expect((await bed.db.client.query(`SELECT count(*)::int AS n FROM task_signals WHERE task_id = $1`, [task.id])).rows[0].n).toBe(0);
  });

  it('fails the run with CALLBACKS_NOT_CONFIGURED in an app without the callbacks option', async () => {
    const app = await bed.start({ duraflow: { workflows: WORKFLOWS } });
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('cb-opens-only', undefined, { maxRetries: 0 });

    const done = await workflows.waitFor(task.id, { timeoutMs: 10_000 });

    expect(done.status).toBe(TaskStatus.FAILED);
    expect(JSON.stringify(done.error)).toContain('CALLBACKS_NOT_CONFIGURED');
    expect(await callbackRows(task.id)).toEqual([]);
  });

  it('deletes a task’s callbacks with the task', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('cb-opens-only');
    await workflows.waitFor(task.id, { timeoutMs: 10_000 });
    expect(await callbackRows(task.id)).toHaveLength(1);
    await app.get(WorkerService).stop();

    await bed.db.client.query(`DELETE FROM agent_tasks WHERE id = $1`, [task.id]);

    expect(await callbackRows(task.id)).toEqual([]);
  });

  it.each([
    [{ baseUrl: 'ftp://example.com', secret: SECRET }, 'callbacks.baseUrl'],
    [{ baseUrl: 'https://example.com?x=1', secret: SECRET }, 'callbacks.baseUrl'],
    [{ baseUrl: 'https://example.com', secret: 'too-short' }, 'callbacks.secret'],
    [{ baseUrl: 'https://example.com', secret: SECRET, path: '/a/:token' }, 'callbacks.path'],
    [{ baseUrl: 'https://example.com', secret: SECRET, maxBodyBytes: 0 }, 'callbacks.maxBodyBytes'],
  ])('refuses the options callbacks %j (%s)', (callbacks, option) => {
    expect(() => resolveDuraflowOptions({ callbacks: callbacks as never })).toThrow(InvalidDuraflowOptionsError);
    expect(() => resolveDuraflowOptions({ callbacks: callbacks as never })).toThrow(`"${option}"`);
  });
});
