import {
  duraflowErrorStatus,
  InvalidListOptionsError,
  InvalidSubmitOptionsError,
  NotSerializableError,
  TaskStatus,
  workflow,
  WorkflowContext,
  WorkflowService,
} from '@duraflow/nestjs';
import { http, startTestEngine } from './fixtures/engine/engine-app';
import { SUBMIT_ONLY, useTestBed } from './support/test-bed';

/*
 * What PostgreSQL cannot store (the NUL character U+0000 anywhere, a lone UTF-16 surrogate in
 * JSON) is refused by the library before any statement, with a typed error an API maps to
 * 400 / INVALID_ARGUMENT: never a database error (500) with nothing said about the value.
 */

const bed = useTestBed({ databasePerTest: true });
const echo = workflow('echo', async (ctx: WorkflowContext) => ctx.input);
const waiter = workflow('waiter', async (ctx: WorkflowContext) => ctx.waitForSignal('go'));
/** What a run's own code can hand the library with NUL in it, by `ctx.input.what`. */
const runSide = workflow('run-side', async (ctx: WorkflowContext<{ what: string }>) => {
  const { what } = ctx.input;
  if (what === 'step-output') await ctx.step.run('out', () => ({ text: 'a\u0000b' }));
  if (what === 'step-error') await ctx.step.run('err', () => Promise.reject(new Error('bad\u0000byte \ud800')), { retries: 1 });
  if (what === 'step-key') await ctx.step.run('k\u0000ey', () => 1);
  if (what === 'workflow-output') return 'done\u0000';
  return 'nothing';
});

async function startApp() {
  return (await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [echo, waiter] } })).get(WorkflowService);
}

describe('NUL characters and lone surrogates in what callers pass', () => {
  it('refuses them in an input (a value or a key, at any depth) with NotSerializableError naming the path, and writes nothing', async () => {
    const workflows = await startApp();
    const bad: Array<[unknown, string]> = [
      [{ note: 'a\u0000b' }, '$.note'],
      [{ lines: ['ok', { text: 'x\u0000' }] }, '$.lines[1].text'],
      [{ nested: { 'k\u0000ey': 1 } }, '$.nested["k\\u0000ey"] (its key)'],
      ['\u0000', '$'],
      [{ half: 'pair \ud83d' }, '$.half'],
    ];
    for (const [input, path] of bad) {
      const refused = workflows.submit('echo', input);
      await expect(refused).rejects.toBeInstanceOf(NotSerializableError);
      await expect(refused).rejects.toMatchObject({ code: 'NOT_SERIALIZABLE', path });
    }
    expect(duraflowErrorStatus('NOT_SERIALIZABLE')).toEqual({ http: 400, grpc: 3 });
    expect(await bed.rows.count('agent_tasks')).toBe(0);
  });

  it('accepts the text "\\u0000" (a backslash and five characters), escaped backslashes and well-formed surrogate pairs', async () => {
    const workflows = await startApp();
    const input = { text: '\\u0000', doubled: '\\\\u0000', emoji: '😀', mixed: 'a\\\\\\ud83d b' };
    const task = await workflows.submit('echo', input);
    expect((await bed.rows.task(task.id)).input).toEqual(input);
  });

  it('refuses NUL in an idempotency key with InvalidSubmitOptionsError', async () => {
    const workflows = await startApp();
    await expect(workflows.submit('echo', {}, { idempotencyKey: 'order\u00001' })).rejects.toBeInstanceOf(InvalidSubmitOptionsError);
    expect(await bed.rows.count('agent_tasks')).toBe(0);
  });

  it('refuses a submitMany whose one input holds NUL, naming its index, and writes none of them', async () => {
    const workflows = await startApp();
    const refused = workflows.submitMany('echo', [{ n: 1 }, { n: 'two\u0000' }, { n: 3 }]);
    await expect(refused).rejects.toMatchObject({ code: 'NOT_SERIALIZABLE', message: expect.stringContaining('index 1') });
    expect(await bed.rows.count('agent_tasks')).toBe(0);
  });

  it('refuses NUL in a signal payload: no signal kept, the task still waits', async () => {
    const workflows = await startApp();
    const task = await workflows.submit('waiter');
    await expect(workflows.signal(task.id, 'go', { reply: 'yes\u0000' })).rejects.toMatchObject({
      code: 'NOT_SERIALIZABLE',
      path: '$.reply',
    });
    const { rows } = await bed.db.client.query(`SELECT count(*)::int AS n FROM task_signals WHERE task_id = $1`, [task.id]);
    expect(rows[0].n).toBe(0);
    expect((await bed.rows.task(task.id)).status).toBe(TaskStatus.PENDING);
  });

  it('refuses NUL in the workflow filter of list and counts with InvalidListOptionsError; a step key with NUL finds no step', async () => {
    const workflows = await startApp();
    const task = await workflows.submit('echo', {});
    await expect(workflows.list({ workflowName: 'ec\u0000ho' })).rejects.toBeInstanceOf(InvalidListOptionsError);
    await expect(workflows.countByStatus({ workflowName: 'ec\u0000ho' })).rejects.toMatchObject({ option: 'workflowName' });
    await expect(workflows.countHeld({ workflowName: 'ec\u0000ho' })).rejects.toMatchObject({ code: 'INVALID_LIST_OPTIONS' });
    expect(await workflows.getStep(task.id, 'st\u0000ep')).toBeNull();
    expect((await workflows.list({ workflowName: 'echo' })).items.map((item) => item.id)).toEqual([task.id]);
  });

  it("answers the engine's POST /tasks with 400 for NUL in the input or the idempotency key, and for a reserved key", async () => {
    const engine = await startTestEngine(bed);
    const booking = { customer: 'ada', from: 'AMS', to: 'LIS' };
    // The engine's own pipe may refuse NUL before the library does: either way a 400, nothing written.
    const inInput = await http(engine, 'POST', '/tasks', {
      body: { workflowName: 'booking', input: { ...booking, customer: 'ada\u0000' } },
    });
    expect(inInput.status).toBe(400);
    const inKey = await http(engine, 'POST', '/tasks', { body: { workflowName: 'booking', input: booking, idempotencyKey: 'k\u0000' } });
    expect(inKey.status).toBe(400);
    const reserved = await http(engine, 'POST', '/tasks', {
      body: { workflowName: 'booking', input: booking, idempotencyKey: 'schedule:nightly:2030-01-01T00:00:00.000Z' },
    });
    expect(reserved).toMatchObject({ status: 400, body: { code: 'INVALID_SUBMIT_OPTIONS' } });
    expect(await bed.rows.count('agent_tasks')).toBe(0);
  });
});

describe("NUL characters in what a run's own code hands the library", () => {
  it.each([
    ['step-output', 'NOT_SERIALIZABLE'],
    ['step-key', 'INVALID_STEP_KEY'],
    ['workflow-output', 'OUTPUT_NOT_SERIALIZABLE'],
  ])('fails the run at once on %s with %s, never a write PostgreSQL refuses', async (what, code) => {
    const workflows = (await bed.start({ duraflow: { workflows: [runSide] } })).get(WorkflowService);
    const task = await workflows.submit('run-side', { what });
    const done = await workflows.waitFor(task.id, { timeoutMs: 20_000 });
    expect(done).toMatchObject({ status: TaskStatus.FAILED, retryCount: 0, error: { code } });
  });

  it('records a step error whose message holds NUL or half a surrogate pair, with U+FFFD in their place', async () => {
    const workflows = (await bed.start({ duraflow: { workflows: [runSide] } })).get(WorkflowService);
    const task = await workflows.submit('run-side', { what: 'step-error' });
    const done = await workflows.waitFor(task.id, { timeoutMs: 20_000 });
    expect(done).toMatchObject({ status: TaskStatus.FAILED, retryCount: 0, error: { message: 'bad\ufffdbyte \ufffd' } });
    expect((await bed.rows.steps(task.id))[0]).toMatchObject({ status: 'failed', attempt: 2, error: { message: 'bad\ufffdbyte \ufffd' } });
  });
});
