import { Client } from 'pg';
import { TaskStatus, WorkflowContext, workflow } from '@duraflow/nestjs';
import { createDuraflowTestEnv, DuraflowTestEnv } from '@duraflow/nestjs/testing';
import { SERVER_URL } from './support/database';

/*
 * The testing kit (@duraflow/nestjs/testing): one clock the engine reads (Node and SQL), moved by
 * advanceTime in order and never early; environments that never see each other's tasks; crashes,
 * failures and stubs injected at the run's one seam; close() drops the database.
 */

/** What the workflows did, in order. */
let events: string[] = [];
const note = (event: string) => events.push(event);
const HOUR = 3_600_000;

const sleeper = workflow('kit-sleeper', async (ctx: WorkflowContext<{ name: string; hours: number }>) => {
  await ctx.step.run('before', () => note(`${ctx.input.name}:before`));
  await ctx.sleep('nap', ctx.input.hours * HOUR);
  await ctx.step.run('after', () => note(`${ctx.input.name}:after`));
  return 'awake';
});

const waiter = workflow('kit-waiter', async (ctx: WorkflowContext) => {
  try {
    return await ctx.waitForSignal<string>('approval', { timeoutMs: 72 * HOUR });
  } catch {
    return 'timed out';
  }
});

const flaky = workflow('kit-flaky', async (ctx: WorkflowContext) =>
  ctx.step.run(
    'call',
    () => {
      note('call ran');
      return 'real';
    },
    { retries: 3, backoff: { initialDelayMs: 60_000, factor: 2, maxDelayMs: 600_000 } },
  ),
);

const pair = workflow('kit-pair', async (ctx: WorkflowContext) => {
  const first = await ctx.step.run('first', () => {
    note('first ran');
    return 1;
  });
  const second = await ctx.step.run('second', () => {
    note('second ran');
    return 2;
  });
  return first + second;
});

const hourly = workflow('kit-hourly', async (ctx: WorkflowContext) => ctx.step.run('tick', () => note('tick')), {
  schedule: { cron: '0 * * * *' },
});

const approval = workflow('kit-approval', async (ctx: WorkflowContext) => {
  const callback = await ctx.createCallback('manager', { timeoutMs: 48 * HOUR });
  await ctx.step.run('mail', () => note(callback.id));
  try {
    return await ctx.waitForCallback<{ approved: boolean }>(callback);
  } catch {
    return 'expired';
  }
});

async function status(env: DuraflowTestEnv, id: string) {
  return (await env.workflows.get(id))!;
}

describe('the testing kit', () => {
  let env: DuraflowTestEnv;
  beforeEach(async () => {
    events = [];
    env = await createDuraflowTestEnv({ options: { workflows: [sleeper, waiter, flaky, pair] } });
  });
  afterEach(() => env.close());

  it('fires sleeps in the order of their ends, none before its end', async () => {
    const long = await env.workflows.submit('kit-sleeper', { name: 'long', hours: 24 });
    const short = await env.workflows.submit('kit-sleeper', { name: 'short', hours: 2 });
    await env.runUntilIdle();
    expect([...events].sort()).toEqual(['long:before', 'short:before']);
    events = [];

    await env.advanceTime('1h');
    expect(events).toEqual([]);
    expect((await status(env, short.id)).status).toBe(TaskStatus.PENDING);

    await env.advanceTime('25h');
    expect(events).toEqual(['short:after', 'long:after']);
    expect((await status(env, short.id)).status).toBe(TaskStatus.COMPLETED);
    expect((await status(env, long.id)).status).toBe(TaskStatus.COMPLETED);
    // Stamped by the engine's clock, at the long sleep's end (24 h ahead), before the advance's end (26 h).
    const completedAhead = (await status(env, long.id)).completedAt!.getTime() - Date.now();
    expect(completedAhead).toBeGreaterThan(23 * HOUR);
    expect(completedAhead).toBeLessThan(25 * HOUR);
  });

  it('ends a signal wait at its timeout, not a moment before', async () => {
    const task = await env.workflows.submit('kit-waiter', {});
    await env.runUntilIdle();
    await env.advanceTime('71h');
    expect((await status(env, task.id)).status).toBe(TaskStatus.PENDING);
    await env.advanceTime('2h');
    const done = await status(env, task.id);
    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(done.output).toBe('timed out');
  });

  it("waits out a retry's backoff on the engine's clock (failStep times)", async () => {
    env.failStep('kit-flaky', 'call', new Error('the API is down'), { times: 2 });
    const task = await env.workflows.submit('kit-flaky', {});
    await env.runUntilIdle();
    // The first backoff is 30 to 60 s (equal jitter over 60 s): nothing before 30 s.
    await env.advanceTime('29s');
    expect(events).toEqual([]);
    expect((await env.getSteps(task.id)).map((step) => [step.status, step.attempt])).toEqual([['failed', 1]]);
    expect((await status(env, task.id)).status).toBe(TaskStatus.RUNNING);

    await env.advanceTime('31s'); // the second attempt, failed too; its backoff is 60 to 120 s
    expect((await env.getSteps(task.id)).map((step) => [step.status, step.attempt])).toEqual([['failed', 2]]);
    expect(events).toEqual([]);

    await env.advanceTime('2m'); // the third attempt runs the real body
    expect(events).toEqual(['call ran']);
    const done = await status(env, task.id);
    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(done.output).toBe('real');
  });

  it('skips time by itself when told to and only timers are left', async () => {
    const skipping = await createDuraflowTestEnv({ options: { workflows: [sleeper] }, skipTime: true });
    try {
      const task = await skipping.workflows.submit('kit-sleeper', { name: 'month', hours: 30 * 24 });
      await skipping.runUntilIdle();
      expect((await skipping.workflows.get(task.id))!.status).toBe(TaskStatus.COMPLETED);
      expect(skipping.now().getTime()).toBeGreaterThanOrEqual(Date.now() + 30 * 24 * HOUR - 60_000);
    } finally {
      await skipping.close();
    }
  });

  it('recovers a run crashed right after a step without running that step again', async () => {
    env.crashAfterStep('kit-pair', 'first');
    const task = await env.workflows.submit('kit-pair', {});
    await env.runUntilIdle();
    const done = await status(env, task.id);
    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(done.output).toBe(3);
    expect(events).toEqual(['first ran', 'second ran']);
    // The crash counted as a retry, as a killed process's does.
    expect(done.retryCount).toBe(1);
  });

  it('recovers a run crashed before a step: the step then runs once', async () => {
    env.crashBeforeStep('kit-pair', 'second');
    const task = await env.workflows.submit('kit-pair', {});
    await env.runUntilIdle();
    expect((await status(env, task.id)).status).toBe(TaskStatus.COMPLETED);
    expect(events).toEqual(['first ran', 'second ran']);
  });

  it("stubs a step's body without touching the workflow", async () => {
    env.stubStep('kit-pair', 'second', () => 40);
    const task = await env.workflows.submit('kit-pair', {});
    await env.runUntilIdle();
    expect((await status(env, task.id)).output).toBe(41);
    expect(events).toEqual(['first ran']);
  });

  it('fails every attempt of a step when no times are given', async () => {
    env.failStep('kit-pair', 'first', new Error('boom'));
    const task = await env.workflows.submit('kit-pair', {});
    await env.runUntilIdle();
    const failed = await status(env, task.id);
    expect(failed.status).toBe(TaskStatus.FAILED);
    expect(failed.error).toMatchObject({ message: 'boom', stepKey: 'first' });
    expect(events).toEqual([]);
  });
});

describe('retention under the testing kit', () => {
  it("removes a finished task once its retention passed on the engine's clock, not before", async () => {
    const env = await createDuraflowTestEnv({ options: { workflows: [pair], retention: { completed: 7 * 24 * HOUR } } });
    try {
      const task = await env.workflows.submit('kit-pair', {});
      await env.runUntilIdle();
      await env.advanceTime('6d');
      expect((await env.workflows.get(task.id))?.status).toBe(TaskStatus.COMPLETED);
      await env.advanceTime('2d');
      expect(await env.workflows.get(task.id)).toBeNull();
    } finally {
      await env.close();
    }
  });
});

describe('the testing kit, refusing', () => {
  it('says which workflow keeps runUntilIdle from settling, and what a duration is', async () => {
    const env = await createDuraflowTestEnv({ options: { workflows: [pair] }, idleTimeoutMs: 300 });
    try {
      env.stubStep('kit-pair', 'first', () => new Promise(() => undefined)); // a step that never returns
      await env.workflows.submit('kit-pair', {});
      await expect(env.runUntilIdle()).rejects.toThrow(/1 task\(s\) still ran and 0 were due \(kit-pair\)/);
      await expect(env.advanceTime('a day' as never)).rejects.toThrow(/Not a duration: a day/);
    } finally {
      await env.close();
    }
  });
});

describe('schedules under the testing kit', () => {
  it('starts one task per tick the advance crosses, in order', async () => {
    events = [];
    const env = await createDuraflowTestEnv({ options: { workflows: [hourly] } });
    try {
      await env.runUntilIdle();
      expect(events).toEqual([]);
      const start = env.now();
      await env.advanceTime('3h');
      expect(events).toEqual(['tick', 'tick', 'tick']);
      const { items } = await env.workflows.list({ workflowName: 'kit-hourly' });
      const ticks = items.map((task) => task.idempotencyKey!.slice('schedule:kit-hourly:'.length)).sort();
      const expected = [1, 2, 3].map((n) => new Date(Math.floor(start.getTime() / HOUR) * HOUR + n * HOUR).toISOString());
      expect(ticks).toEqual(expected);
    } finally {
      await env.close();
    }
  });
});

describe('callbacks under the testing kit', () => {
  let env: DuraflowTestEnv;
  beforeEach(async () => {
    events = [];
    const callbacks = { baseUrl: 'https://app.example.com', secret: 'a-test-secret-of-at-least-32-bytes!' };
    env = await createDuraflowTestEnv({ options: { workflows: [approval], callbacks } });
  });
  afterEach(() => env.close());

  it('completes a callback through env.completeCallback', async () => {
    const task = await env.workflows.submit('kit-approval', {});
    await env.runUntilIdle();
    await env.completeCallback(events[0], { approved: true });
    await env.runUntilIdle();
    expect((await status(env, task.id)).output).toEqual({ approved: true });
  });

  it("expires a callback at its timeout on the engine's clock, not before", async () => {
    const task = await env.workflows.submit('kit-approval', {});
    await env.runUntilIdle();
    await env.advanceTime('47h');
    expect((await status(env, task.id)).status).toBe(TaskStatus.PENDING);
    await env.advanceTime('2h');
    expect((await status(env, task.id)).output).toBe('expired');
    await expect(env.completeCallback(events[0], { approved: true })).rejects.toThrow();
  });
});

const reindex = workflow('kit-reindex', async (ctx: WorkflowContext<{ docId: string; rev: number }>) => ctx.input.rev, {
  on: 'kit.doc.changed',
  debounce: { key: 'docId', periodMs: HOUR, maxWaitMs: 24 * HOUR },
});

describe('the testing kit with events', () => {
  let env: DuraflowTestEnv;
  beforeEach(async () => {
    env = await createDuraflowTestEnv({ options: { workflows: [reindex] } });
  });
  afterEach(() => env.close());

  it("starts a debounced workflow once its key has been quiet for the period on the engine's clock, not before", async () => {
    await env.workflows.publish('kit.doc.changed', { docId: 'a', rev: 1 });
    await env.advanceTime('50m');
    await env.workflows.publish('kit.doc.changed', { docId: 'a', rev: 2 });
    await env.advanceTime('59m');
    expect((await env.workflows.list({ workflowName: 'kit-reindex' })).items).toHaveLength(0);
    await env.advanceTime('2m');
    const started = (await env.workflows.list({ workflowName: 'kit-reindex' })).items;
    expect(started).toHaveLength(1);
    expect((await status(env, started[0].id)).output).toBe(2);
  });
});

const metered = workflow('kit-metered', async (ctx: WorkflowContext<{ n: number }>) => ctx.input.n, {
  rateLimit: { limit: 2, periodMs: HOUR },
});

describe('the testing kit with a rate limit', () => {
  let env: DuraflowTestEnv;
  beforeEach(async () => {
    env = await createDuraflowTestEnv({ options: { workflows: [metered] } });
  });
  afterEach(() => env.close());

  it("settles with tasks a full rate-limit window holds back, and starts them as the engine's clock frees places", async () => {
    const tasks: Array<{ id: string }> = [];
    for (let n = 0; n < 5; n++) tasks.push(await env.workflows.submit('kit-metered', { n }));
    const completed = async () => {
      let count = 0;
      for (const task of tasks) if ((await status(env, task.id)).status === TaskStatus.COMPLETED) count++;
      return count;
    };
    await env.runUntilIdle();
    expect(await completed()).toBe(2);
    await env.advanceTime('59m');
    expect(await completed()).toBe(2);
    await env.advanceTime('2m');
    expect(await completed()).toBe(4);
    await env.advanceTime('1h');
    expect(await completed()).toBe(5);
  });
});

describe('test environments', () => {
  it('never see each other’s tasks or clocks, and close() drops the database', async () => {
    const one = await createDuraflowTestEnv({ options: { workflows: [sleeper] } });
    const two = await createDuraflowTestEnv({ options: { workflows: [sleeper] } });
    try {
      const task = await one.workflows.submit('kit-sleeper', { name: 'one', hours: 1 });
      await one.runUntilIdle();
      expect((await two.workflows.list()).items).toEqual([]);
      expect(await two.workflows.get(task.id)).toBeNull();
      await two.advanceTime('2h');
      expect((await one.workflows.get(task.id))!.status).toBe(TaskStatus.PENDING);
      expect(one.now().getTime()).toBeLessThan(two.now().getTime() - HOUR);
    } finally {
      await two.close();
    }
    const name = new URL(one.databaseUrl).pathname.slice(1);
    await one.close();
    const admin = new Client({ connectionString: SERVER_URL });
    await admin.connect();
    try {
      const { rows } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
      expect(rows).toEqual([]);
    } finally {
      await admin.end();
    }
  });
});
