import { Client } from 'pg';
import { TaskStatus, WorkflowContext, workflow } from '@duraflow/nestjs';
import { createDuraflowTestEnv, DuraflowTestEnv } from '@duraflow/nestjs/testing';
import kitGlobalSetup from '@duraflow/nestjs/testing/global-setup';
import kitGlobalTeardown from '@duraflow/nestjs/testing/global-teardown';
import { PrivatePostgres } from './support/private-postgres';

/*
 * The testing kit, beyond testing-kit.spec.ts: what else the engine decides by time reads its one
 * clock (published events' and started groups' retention, a step's completed_at, a schedule's
 * next tick); the determinism guard reached through the kit; the kit's Jest global setup and
 * teardown, run as a consumer's jest.config runs them.
 */

const HOUR = 3_600_000;

async function status(env: DuraflowTestEnv, id: string) {
  return (await env.workflows.get(id))!;
}

/** One row of counts read past the library, on the environment's own database. */
async function count(env: DuraflowTestEnv, sql: string): Promise<number> {
  const client = new Client({ connectionString: env.databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: number }>(`SELECT (${sql})::int AS n`);
    return rows[0].n;
  } finally {
    await client.end();
  }
}

const indexer = workflow('clock-indexer', async (ctx: WorkflowContext<{ docId: string; rev: number }>) => ctx.input.rev, {
  on: 'clock.doc.changed',
  debounce: { key: 'docId', periodMs: HOUR, maxWaitMs: 24 * HOUR },
});

describe("published events' retention under the testing kit", () => {
  let env: DuraflowTestEnv;
  beforeEach(async () => {
    env = await createDuraflowTestEnv({ options: { workflows: [indexer], events: { retentionMs: 7 * 24 * HOUR } } });
  });
  afterEach(() => env.close());

  /** The events published by name (`name`), or every one (the engine's own too: a task finished). */
  const events = (name?: string) => count(env, `SELECT count(*) FROM duraflow_published_events${name ? ` WHERE name = '${name}'` : ''}`);
  const startedGroups = () => count(env, `SELECT count(*) FROM duraflow_event_groups WHERE started_at IS NOT NULL`);

  it("deletes an event and its started debounce once their retention passed on the engine's clock, not before", async () => {
    await env.workflows.publish('clock.doc.changed', { docId: 'a', rev: 1 });
    await env.advanceTime('2h'); // the debounce's hour of quiet: its task starts and finishes
    expect((await env.workflows.list({ workflowName: 'clock-indexer' })).items.map((task) => task.status)).toEqual([TaskStatus.COMPLETED]);
    expect([await events('clock.doc.changed'), await startedGroups()]).toEqual([1, 1]);

    await env.advanceTime('6d');
    expect([await events('clock.doc.changed'), await startedGroups()]).toEqual([1, 1]);
    await env.advanceTime('1d'); // 7 d and 2 h after the publish, 7 d and an hour after the start
    expect([await events(), await startedGroups()]).toEqual([0, 0]);
  });

  it('counts the age of an event published after the clock moved from that moment on the same clock', async () => {
    await env.advanceTime('30d');
    await env.workflows.publish('clock.unheard', { n: 1 });
    await env.advanceTime('6d');
    expect(await events('clock.unheard')).toBe(1);
    await env.advanceTime('2d');
    expect(await events('clock.unheard')).toBe(0);
  });
});

const napper = workflow('clock-napper', async (ctx: WorkflowContext) => {
  await ctx.step.run('before', () => 'before');
  await ctx.sleep('nap', HOUR);
  return ctx.step.run('after', () => 'after');
});

describe("a step's times under the testing kit", () => {
  it('records a step run after the clock moved as finishing after it started, both on the engine’s clock', async () => {
    const env = await createDuraflowTestEnv({ options: { workflows: [napper] } });
    try {
      const task = await env.workflows.submit('clock-napper', {});
      await env.runUntilIdle();
      const submittedAt = env.now().getTime();
      await env.advanceTime('2h');
      expect((await status(env, task.id)).status).toBe(TaskStatus.COMPLETED);
      const steps = (await env.getSteps(task.id)).filter((step) => step.status === 'completed' && step.stepKey !== 'nap');
      expect(steps.map((step) => step.stepKey).sort()).toEqual(['after', 'before']);
      for (const step of steps) expect(step.completedAt!.getTime()).toBeGreaterThanOrEqual(step.startedAt!.getTime());
      const after = steps.find((step) => step.stepKey === 'after')!;
      // The nap's end on the engine's clock, an hour after the run began: real time is not there yet.
      expect(after.completedAt!.getTime()).toBeGreaterThanOrEqual(submittedAt + HOUR - 1_000);
    } finally {
      await env.close();
    }
  });
});

const hourly = workflow('clock-hourly', async (ctx: WorkflowContext) => ctx.step.run('tick', () => 'tick'), {
  schedule: { cron: '0 * * * *' },
});

describe("a schedule's next tick under the testing kit", () => {
  it("is listed as the next tick after the engine's clock, the one the ticker starts next", async () => {
    const env = await createDuraflowTestEnv({ options: { workflows: [hourly] } });
    try {
      await env.runUntilIdle();
      await env.advanceTime('5h');
      const [schedule] = await env.workflows.listSchedules();
      const now = env.now().getTime();
      expect(schedule.name).toBe('clock-hourly');
      expect(schedule.nextTickAt!.getTime()).toBe(Math.floor(now / HOUR) * HOUR + HOUR);
      expect(schedule.nextTickAt!.getTime()).toBeGreaterThan(now);
      // The ticker's own view of its next tick is the same one.
      const ticks = (await env.workflows.list({ workflowName: 'clock-hourly' })).items.length;
      await env.advanceTime(schedule.nextTickAt!.getTime() - now);
      expect((await env.workflows.list({ workflowName: 'clock-hourly' })).items).toHaveLength(ticks + 1);
    } finally {
      await env.close();
    }
  });
});

/** What the guarded workflow's steps ran, and the code deployed now ("a deploy" switches it). */
const deployment = { code: 'original' as 'original' | 'renamed', ran: [] as string[] };

function step(ctx: WorkflowContext, key: string) {
  return ctx.step.run(key, () => {
    deployment.ran.push(key);
    return `${key}-done`;
  });
}

/** original: A, B, C; renamed: A, B2, C (the recorded B asked for under another key). */
const guarded = workflow('clock-guarded', async (ctx: WorkflowContext) => {
  const outputs = [await step(ctx, 'A')];
  outputs.push(await step(ctx, deployment.code === 'original' ? 'B' : 'B2'));
  await ctx.sleep('cool-off', HOUR);
  outputs.push(await step(ctx, 'C'));
  return outputs;
});

describe('the determinism guard under the testing kit', () => {
  let env: DuraflowTestEnv;
  beforeEach(async () => {
    deployment.code = 'original';
    deployment.ran = [];
    env = await createDuraflowTestEnv({ options: { workflows: [guarded] } });
  });
  afterEach(() => env.close());

  async function expectHeld(id: string) {
    const held = await status(env, id);
    expect(held.status).toBe(TaskStatus.PENDING);
    expect(held.heldAt).not.toBeNull();
    expect(held.error).toMatchObject({ code: 'NON_DETERMINISM', name: 'NonDeterminismError', recordedStep: 'B', requestedStep: 'B2' });
  }

  it('holds a run recovered from a crash on changed code, runs nothing new, and finishes it once resumed on fixed code', async () => {
    // The worker dies right after B's checkpoint; a deploy that renamed B lands while B runs, so the recovery runs the new code.
    env.crashAfterStep('clock-guarded', 'B');
    env.stubStep('clock-guarded', 'B', () => {
      deployment.ran.push('B');
      deployment.code = 'renamed';
      return 'B-done';
    });
    const task = await env.workflows.submit('clock-guarded', {});
    await env.runUntilIdle();
    await expectHeld(task.id);
    expect((await status(env, task.id)).retryCount).toBe(1); // the crash
    expect(deployment.ran).toEqual(['A', 'B']); // neither B2 nor anything after: the guard held it first

    // Held, it is passed over however far the clock moves.
    await env.advanceTime('2h');
    await expectHeld(task.id);

    deployment.code = 'original';
    await env.workflows.resume(task.id);
    await env.runUntilIdle();
    expect((await status(env, task.id)).status).toBe(TaskStatus.PENDING); // the cool-off
    await env.advanceTime('1h');
    const done = await status(env, task.id);
    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(done.output).toEqual(['A-done', 'B-done', 'C-done']);
    expect(deployment.ran).toEqual(['A', 'B', 'C']);
  });

  it('holds a run whose code changed while it slept, when it wakes', async () => {
    const task = await env.workflows.submit('clock-guarded', {});
    await env.runUntilIdle();
    expect(deployment.ran).toEqual(['A', 'B']);
    deployment.code = 'renamed'; // a deploy during the cool-off
    await env.advanceTime('1h');
    await expectHeld(task.id);
    expect(deployment.ran).toEqual(['A', 'B']);

    deployment.code = 'original';
    await env.workflows.resume(task.id);
    await env.runUntilIdle();
    expect((await status(env, task.id)).output).toEqual(['A-done', 'B-done', 'C-done']);
    expect(deployment.ran).toEqual(['A', 'B', 'C']);
  });
});

describe("the kit's Jest global setup and teardown", () => {
  it('keep a DATABASE_URL that is set, and the teardown drops the templates environments were cloned from there', async () => {
    const server = await PrivatePostgres.start();
    const before = process.env.DATABASE_URL;
    const templates = async () =>
      (
        await server.query<{ datname: string }>('postgres', `SELECT datname FROM pg_database WHERE datname LIKE 'duraflow_env%' ORDER BY 1`)
      ).map((row) => row.datname);
    try {
      process.env.DATABASE_URL = server.url;
      await kitGlobalSetup();
      expect(process.env.DATABASE_URL).toBe(server.url);

      const env = await createDuraflowTestEnv({ options: { workflows: [napper] } });
      await env.close();
      const built = await templates();
      expect(built).toEqual([expect.stringMatching(/^duraflow_env_tpl_[0-9a-f]{16}$/)]);
      // One another run is still building: not the teardown's to drop.
      const building = `${built[0]}_0a1b2c3d`;
      await server.query('postgres', `CREATE DATABASE ${building}`);

      await kitGlobalTeardown();
      expect(await templates()).toEqual([building]);
      expect(process.env.DATABASE_URL).toBe(server.url);
    } finally {
      if (before === undefined) delete process.env.DATABASE_URL;
      else process.env.DATABASE_URL = before;
      await server.destroy();
    }
  }, 120_000);
});
