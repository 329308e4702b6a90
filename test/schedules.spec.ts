import { IsString } from 'class-validator';
import { Cron } from 'croner';
import {
  DuplicateScheduleError,
  DuraflowError,
  DuraflowModule,
  InvalidScheduleCronError,
  InvalidScheduleError,
  InvalidScheduleInputError,
  ScheduleDefinition,
  TaskStatus,
  UnknownScheduleTimezoneError,
  UnknownScheduleWorkflowError,
  Workflow,
  workflow,
  WorkflowContext,
  WorkflowService,
} from '@duraflow/nestjs';
import { createDuraflowTestEnv } from '@duraflow/nestjs/testing';
import { CronSchedule } from '../libs/duraflow/src/schedules/cron-schedule';
import { TEST_DURAFLOW_OPTIONS, TestBed, useTestBed } from './support/test-bed';
import { eventually, sleep } from './support/waiting';

class SyncInput {
  @IsString()
  source!: string;
}

const sync = workflow('sync', async (ctx: WorkflowContext<SyncInput>) => ({ synced: ctx.input.source }), { input: SyncInput });
const yearly = workflow('yearly-report', async () => ({ reported: true }));
const amsterdam = workflow('amsterdam-report', async () => ({ reported: true }));

@Workflow('heartbeat-ping', { schedule: { cron: '* * * * * *', input: { from: 'decorator' }, catchUp: 'all' } })
class HeartbeatPingWorkflow {
  async run(ctx: WorkflowContext<{ from: string }>) {
    return { pinged: ctx.input.from };
  }
}

/** The tasks a schedule started: tick time (from the idempotency key), id, input and status. */
async function scheduledTasks(bed: TestBed, scheduleName: string) {
  const { rows } = await bed.db.client.query(
    `SELECT id, idempotency_key, input, status FROM agent_tasks WHERE idempotency_key LIKE $1 ORDER BY idempotency_key`,
    [`schedule:${scheduleName}:%`],
  );
  return rows.map((row) => ({
    tick: row.idempotency_key.slice(`schedule:${scheduleName}:`.length) as string,
    id: row.id as string,
    input: row.input,
    status: row.status as string,
  }));
}

async function tickRows(bed: TestBed, scheduleName: string) {
  const { rows } = await bed.db.client.query(
    `SELECT tick_at, task_id FROM duraflow_schedule_ticks WHERE schedule_name = $1 ORDER BY tick_at`,
    [scheduleName],
  );
  return rows.map((row) => ({ tick: (row.tick_at as Date).toISOString(), taskId: row.task_id as string }));
}

async function lastTickAt(bed: TestBed, scheduleName: string): Promise<string | null> {
  const { rows } = await bed.db.client.query(`SELECT last_tick_at FROM duraflow_schedules WHERE name = $1`, [scheduleName]);
  return rows[0]?.last_tick_at ? (rows[0].last_tick_at as Date).toISOString() : null;
}

/** A schedule's row as it would be after its nodes ran until `lastTick` and all went down. */
async function seedScheduleRow(bed: TestBed, schedule: ScheduleDefinition, lastTick: Date) {
  await bed.db.client.query(
    `INSERT INTO duraflow_schedules (name, workflow_name, cron, timezone, last_tick_at) VALUES ($1, $2, $3, $4, $5)`,
    [schedule.name, schedule.workflow, schedule.cron, schedule.timezone ?? 'UTC', lastTick],
  );
}

/** Jan 1 00:00 UTC of every year from `from` to this one: the ticks of '0 0 1 1 *' since a date in `from - 1`. */
function newYears(from: number): string[] {
  const years: string[] = [];
  for (let year = from; year <= new Date().getUTCFullYear(); year++) years.push(`${year}-01-01T00:00:00.000Z`);
  return years;
}

/** The wall-clock time of `iso` in `timezone`, as HH:MM:SS. */
function wallClock(iso: string | Date, timezone: string): string {
  return new Intl.DateTimeFormat('en-GB', {
    timeZone: timezone,
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
  }).format(new Date(iso));
}

describe('schedules', () => {
  describe('ticking', () => {
    const bed = useTestBed();

    it('starts one task per tick of a @Workflow schedule, with its input, each run to completion', async () => {
      const app = await bed.start({ providers: [HeartbeatPingWorkflow] });
      await eventually('three ticks have started a task', async () => (await scheduledTasks(bed, 'heartbeat-ping')).length >= 3);
      await bed.close(app);

      const tasks = await scheduledTasks(bed, 'heartbeat-ping');
      const ticks = await tickRows(bed, 'heartbeat-ping');
      expect(ticks.map((tick) => tick.tick)).toEqual(tasks.map((task) => task.tick));
      expect(ticks.map((tick) => tick.taskId)).toEqual(tasks.map((task) => task.id));
      for (const task of tasks) expect(task.input).toEqual({ from: 'decorator' });
      // Whole seconds, one apart: no tick skipped, none twice.
      const seconds = tasks.map((task) => Date.parse(task.tick) / 1000);
      for (const [i, second] of seconds.entries()) {
        expect(Number.isInteger(second)).toBe(true);
        if (i > 0) expect(second - seconds[i - 1]).toBe(1);
      }
      expect(await lastTickAt(bed, 'heartbeat-ping')).toBe(tasks[tasks.length - 1].tick);
    });

    it('starts the tasks of a forRoot({ schedules }) schedule with its input checked by the workflow DTO', async () => {
      const app = await bed.start({
        duraflow: {
          workflows: [sync],
          schedules: [{ name: 'sync-every-second', workflow: 'sync', cron: '* * * * * *', input: { source: 'crm' } }],
        },
      });
      const workflows = app.get(WorkflowService);
      const [first] = await eventually('a tick has started a task', () => scheduledTasks(bed, 'sync-every-second'), {
        until: (tasks) => tasks.length > 0,
      });
      const done = await workflows.waitFor(first.id, { timeoutMs: 10_000 });
      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(done.output).toEqual({ synced: 'crm' });
      expect(done.idempotencyKey).toBe(`schedule:sync-every-second:${first.tick}`);
    });

    it('starts the tasks of a functional workflow’s own schedule, with the options built by forRootAsync', async () => {
      const own = workflow('own-schedule', async (ctx: WorkflowContext<{ from: string }>) => ({ from: ctx.input.from }), {
        schedule: { cron: '* * * * * *', input: { from: 'functional' } },
      });
      const app = await bed.start({
        duraflowModule: DuraflowModule.forRootAsync({
          useFactory: async () => ({
            ...TEST_DURAFLOW_OPTIONS,
            workflows: [own, sync],
            schedules: [{ name: 'async-sync', workflow: 'sync', cron: '0 3 * * *', input: { source: 'async' } }],
          }),
        }),
      });
      const [first] = await eventually('a tick has started a task', () => scheduledTasks(bed, 'own-schedule'), {
        until: (tasks) => tasks.length > 0,
      });
      expect(first.input).toEqual({ from: 'functional' });
      expect((await app.get(WorkflowService).listSchedules()).map((schedule) => [schedule.name, schedule.workflow])).toEqual([
        ['async-sync', 'sync'],
        ['own-schedule', 'own-schedule'],
      ]);
    });

    it('lists each schedule with its cron, time zone, next tick and the task of its last tick', async () => {
      const app = await bed.start({
        duraflow: {
          workflows: [sync, amsterdam],
          schedules: [
            { name: 'sync-listed', workflow: 'sync', cron: '* * * * * *', input: { source: 'erp' } },
            { name: 'amsterdam-listed', workflow: 'amsterdam-report', cron: '0 2 * * *', timezone: 'Europe/Amsterdam' },
          ],
        },
      });
      const workflows = app.get(WorkflowService);
      await eventually('a tick of sync-listed has completed', async () => {
        const listed = await workflows.listSchedules();
        return listed.find((schedule) => schedule.name === 'sync-listed')?.lastTask?.status === TaskStatus.COMPLETED;
      });

      const before = Date.now();
      const [amsterdamListed, syncListed] = await workflows.listSchedules();
      const newestTick = (await tickRows(bed, 'sync-listed')).pop()!;
      expect(syncListed).toMatchObject({ name: 'sync-listed', workflow: 'sync', cron: '* * * * * *', timezone: 'UTC', catchUp: 'latest' });
      expect(syncListed.nextTickAt!.getTime()).toBeGreaterThan(before - 1000);
      expect(syncListed.lastTask!.id).toBe(newestTick.taskId);
      expect(syncListed.lastTask!.tickAt.toISOString()).toBe(newestTick.tick);
      expect(syncListed.lastTickAt!.getTime()).toBeGreaterThanOrEqual(syncListed.lastTask!.tickAt.getTime());

      expect(amsterdamListed).toMatchObject({ name: 'amsterdam-listed', workflow: 'amsterdam-report', timezone: 'Europe/Amsterdam' });
      expect(amsterdamListed.nextTickAt).toEqual(new Cron('0 2 * * *', { timezone: 'Europe/Amsterdam' }).nextRun());
      expect(wallClock(amsterdamListed.nextTickAt!, 'Europe/Amsterdam')).toBe('02:00:00');
      expect(amsterdamListed.lastTask).toBeNull();
      expect(amsterdamListed.lastTickAt).toBeNull();
    });

    it('goes on ticking when a tick’s task fails or is cancelled, and lists the last one as it ended', async () => {
      const failing = workflow('failing-report', async () => {
        throw new Error('the report server is down');
      });
      const app = await bed.start({
        duraflow: { workflows: [failing], schedules: [{ name: 'failing-every-second', workflow: 'failing-report', cron: '* * * * * *' }] },
      });
      const workflows = app.get(WorkflowService);
      const [first] = await eventually('a tick has started a task', () => scheduledTasks(bed, 'failing-every-second'), {
        until: (tasks) => tasks.length > 0,
      });
      const cancelled = await workflows.cancel(first.id).catch(() => null);
      await eventually('two more ticks have started a task', async () => (await scheduledTasks(bed, 'failing-every-second')).length >= 3);
      const listed = await eventually(
        'the last tick’s task has failed',
        async () => (await workflows.listSchedules()).find((schedule) => schedule.name === 'failing-every-second')!,
        { until: (schedule) => schedule.lastTask?.status === TaskStatus.FAILED },
      );
      expect(listed.lastTask!.id).not.toBe(first.id);
      expect([TaskStatus.CANCELLED, TaskStatus.FAILED]).toContain((await workflows.get(first.id))!.status);
      if (cancelled) expect(cancelled.status).toBe(TaskStatus.CANCELLED);
    });

    it('does not tick on a node whose worker is disabled, and lists its schedules there all the same', async () => {
      const app = await bed.start({
        duraflow: {
          worker: { enabled: false },
          workflows: [sync],
          schedules: [{ name: 'sync-submit-only', workflow: 'sync', cron: '* * * * * *', input: { source: 'none' } }],
        },
      });
      await sleep(2_500);
      expect(await scheduledTasks(bed, 'sync-submit-only')).toEqual([]);
      expect(await lastTickAt(bed, 'sync-submit-only')).toBeNull();
      const [listed] = await app.get(WorkflowService).listSchedules();
      expect(listed).toMatchObject({ name: 'sync-submit-only', lastTask: null, lastTickAt: null });
      expect(listed.nextTickAt).toBeInstanceOf(Date);
    });

    it('waits for a tick further off than a Node timer reaches (2^31 ms) without waking up over and over', async () => {
      // Once a year, on a day about 60 days from now: always more than 24.8 days away.
      const day = new Date(Date.now() + 60 * 86_400_000);
      const schedule: ScheduleDefinition = {
        name: 'far-off',
        workflow: 'sync',
        cron: `0 0 ${Math.min(day.getUTCDate(), 28)} ${day.getUTCMonth() + 1} *`,
        input: { source: 'far' },
      };
      const app = await bed.start({ duraflow: { workflows: [sync], schedules: [schedule] } });
      const [listed] = await app.get(WorkflowService).listSchedules();
      expect(listed.nextTickAt!.getTime() - Date.now()).toBeGreaterThan(2 ** 31 - 1);
      // Each wake-up computes the next tick: a delay past what a timer takes would fire at once, again and again.
      const nextTicks = jest.spyOn(CronSchedule.prototype, 'nextAfter');
      try {
        await sleep(500);
        expect(nextTicks.mock.calls.length).toBeLessThan(3);
      } finally {
        nextTicks.mockRestore();
      }
      expect(await scheduledTasks(bed, 'far-off')).toEqual([]);
    });

    it('starts that far-off tick on its day, once (testing kit: the clock moved 61 days)', async () => {
      const day = new Date(Date.now() + 60 * 86_400_000);
      const cron = `0 0 ${Math.min(day.getUTCDate(), 28)} ${day.getUTCMonth() + 1} *`;
      const schedule: ScheduleDefinition = { name: 'far-off', workflow: 'sync', cron, input: { source: 'far' } };
      const env = await createDuraflowTestEnv({ options: { workflows: [sync], schedules: [schedule] } });
      try {
        const [listed] = await env.workflows.listSchedules();
        await env.advanceTime(listed.nextTickAt!.getTime() - env.now().getTime() - 60_000);
        expect((await env.workflows.list()).items).toEqual([]);

        await env.advanceTime('61d');

        const { items } = await env.workflows.list();
        expect(items.map((task) => [task.idempotencyKey, task.status, task.output])).toEqual([
          [`schedule:far-off:${listed.nextTickAt!.toISOString()}`, TaskStatus.COMPLETED, { synced: 'far' }],
        ]);
      } finally {
        await env.close();
      }
    });

    it('stops ticking when the application shuts down', async () => {
      const app = await bed.start({
        duraflow: {
          workflows: [sync],
          schedules: [{ name: 'sync-shutdown', workflow: 'sync', cron: '* * * * * *', input: { source: 'x' } }],
        },
      });
      await eventually('a tick has started a task', async () => (await scheduledTasks(bed, 'sync-shutdown')).length > 0);
      await bed.close(app);
      const atShutdown = (await scheduledTasks(bed, 'sync-shutdown')).length;
      await sleep(2_500);
      expect((await scheduledTasks(bed, 'sync-shutdown')).length).toBe(atShutdown);
    });
  });

  describe('time zones', () => {
    it('reads the cron in the schedule’s time zone, across a daylight saving change (croner)', () => {
      const schedule = new CronSchedule('0 2 * * *', 'Europe/Amsterdam');
      // 2 am on 2026-03-28 is CET (UTC+1); on 2026-03-29 02:00 does not exist (clocks go to 03:00 CEST): it
      // runs at the first time after the gap; on 2026-03-30 2 am is CEST (UTC+2).
      expect(schedule.nextAfter(new Date('2026-03-27T12:00:00Z'))!.toISOString()).toBe('2026-03-28T01:00:00.000Z');
      expect(schedule.nextAfter(new Date('2026-03-28T12:00:00Z'))!.toISOString()).toBe('2026-03-29T01:00:00.000Z');
      expect(schedule.nextAfter(new Date('2026-03-29T12:00:00Z'))!.toISOString()).toBe('2026-03-30T00:00:00.000Z');
      expect(new CronSchedule('0 2 * * *', 'UTC').nextAfter(new Date('2026-03-29T12:00:00Z'))!.toISOString()).toBe(
        '2026-03-30T02:00:00.000Z',
      );
    });

    it('lists the ticks between two times, oldest first, at most the newest `limit`', () => {
      const schedule = new CronSchedule('*/10 * * * * *', 'UTC');
      const ticks = (after: string | null, upTo: string, limit: number) =>
        schedule.ticksBetween(after ? new Date(after) : null, new Date(upTo), limit).map((tick) => tick.toISOString());
      expect(ticks('2026-01-01T00:00:00Z', '2026-01-01T00:00:30Z', 10)).toEqual([
        '2026-01-01T00:00:10.000Z',
        '2026-01-01T00:00:20.000Z',
        '2026-01-01T00:00:30.000Z',
      ]);
      expect(ticks('2026-01-01T00:00:00Z', '2026-01-01T00:00:30Z', 2)).toEqual(['2026-01-01T00:00:20.000Z', '2026-01-01T00:00:30.000Z']);
      expect(ticks(null, '2026-01-01T00:00:29.999Z', 1)).toEqual(['2026-01-01T00:00:20.000Z']);
    });
  });

  describe('catch-up of the ticks missed while no node ran', () => {
    const bed = useTestBed();
    const startWith = (schedule: ScheduleDefinition) => bed.start({ duraflow: { workflows: [yearly, amsterdam], schedules: [schedule] } });
    const downSince = new Date('2019-06-01T00:00:00Z');

    it("starts only the most recent missed tick with catchUp 'latest' (the default), once across restarts", async () => {
      const schedule: ScheduleDefinition = { name: 'yearly-latest', workflow: 'yearly-report', cron: '0 0 1 1 *' };
      await seedScheduleRow(bed, schedule, downSince);
      const newest = newYears(2020).pop()!;

      await bed.close(await startWith(schedule));
      expect((await scheduledTasks(bed, 'yearly-latest')).map((task) => task.tick)).toEqual([newest]);
      expect(await lastTickAt(bed, 'yearly-latest')).toBe(newest);

      await bed.close(await startWith(schedule));
      expect((await scheduledTasks(bed, 'yearly-latest')).map((task) => task.tick)).toEqual([newest]);
    });

    it("starts every missed tick, oldest first, with catchUp 'all'", async () => {
      const schedule: ScheduleDefinition = { name: 'yearly-all', workflow: 'yearly-report', cron: '0 0 1 1 *', catchUp: 'all' };
      await seedScheduleRow(bed, schedule, downSince);
      await bed.close(await startWith(schedule));

      const years = newYears(2020);
      expect((await scheduledTasks(bed, 'yearly-all')).map((task) => task.tick)).toEqual(years);
      expect((await tickRows(bed, 'yearly-all')).map((tick) => tick.tick)).toEqual(years);
      expect(await lastTickAt(bed, 'yearly-all')).toBe(years[years.length - 1]);
    });

    it("starts only the newest maxCatchUp missed ticks with catchUp 'all', and skips the older ones for good", async () => {
      const schedule: ScheduleDefinition = {
        name: 'yearly-bounded',
        workflow: 'yearly-report',
        cron: '0 0 1 1 *',
        catchUp: 'all',
        maxCatchUp: 3,
      };
      await seedScheduleRow(bed, schedule, downSince);
      await bed.close(await startWith(schedule));
      const newestThree = newYears(2020).slice(-3);
      expect((await scheduledTasks(bed, 'yearly-bounded')).map((task) => task.tick)).toEqual(newestThree);

      await bed.close(await startWith(schedule));
      expect((await scheduledTasks(bed, 'yearly-bounded')).map((task) => task.tick)).toEqual(newestThree);
    });

    it("starts no missed tick with catchUp 'none', and remembers them as done", async () => {
      const schedule: ScheduleDefinition = { name: 'yearly-none', workflow: 'yearly-report', cron: '0 0 1 1 *', catchUp: 'none' };
      await seedScheduleRow(bed, schedule, downSince);
      await bed.close(await startWith(schedule));

      expect(await scheduledTasks(bed, 'yearly-none')).toEqual([]);
      expect(await lastTickAt(bed, 'yearly-none')).toBe(newYears(2020).pop());
    });

    it('catches up nothing for a schedule that has never ticked: it starts from its first boot', async () => {
      const schedule: ScheduleDefinition = { name: 'yearly-new', workflow: 'yearly-report', cron: '0 0 1 1 *', catchUp: 'all' };
      await bed.close(await startWith(schedule));
      expect(await scheduledTasks(bed, 'yearly-new')).toEqual([]);
      expect(await lastTickAt(bed, 'yearly-new')).toBeNull();
      const { rows } = await bed.db.client.query(`SELECT workflow_name, cron, timezone FROM duraflow_schedules WHERE name = 'yearly-new'`);
      expect(rows).toEqual([{ workflow_name: 'yearly-report', cron: '0 0 1 1 *', timezone: 'UTC' }]);
    });

    it('keeps the newest 1000 tick rows of a schedule, pruning older ones as it ticks', async () => {
      const schedule: ScheduleDefinition = { name: 'hourly-pruned', workflow: 'yearly-report', cron: '0 * * * *' };
      const oldest = new Date('2020-01-01T00:00:00Z').getTime();
      await seedScheduleRow(bed, schedule, new Date(oldest + 1004 * 3_600_000));
      await bed.db.client.query(
        `INSERT INTO duraflow_schedule_ticks (schedule_name, tick_at)
         SELECT $1, $2::timestamptz + g * interval '1 hour' FROM generate_series(0, 1004) AS g`,
        [schedule.name, new Date(oldest)],
      );
      await bed.close(await startWith(schedule));

      const { rows } = await bed.db.client.query(
        `SELECT count(*)::int AS n, min(tick_at) AS oldest FROM duraflow_schedule_ticks WHERE schedule_name = $1`,
        [schedule.name],
      );
      // 1005 seeded and the one the catch-up started: the 6 oldest went.
      expect(rows[0]).toEqual({ n: 1000, oldest: new Date(oldest + 6 * 3_600_000) });
      expect(await scheduledTasks(bed, 'hourly-pruned')).toHaveLength(1);
    });

    it('catches up the ticks of the schedule’s time zone', async () => {
      const schedule: ScheduleDefinition = {
        name: 'amsterdam-all',
        workflow: 'amsterdam-report',
        cron: '0 2 * * *',
        timezone: 'Europe/Amsterdam',
        catchUp: 'all',
        maxCatchUp: 3,
      };
      await seedScheduleRow(bed, schedule, new Date(Date.now() - 10 * 86_400_000));
      await bed.close(await startWith(schedule));

      const ticks = (await scheduledTasks(bed, 'amsterdam-all')).map((task) => task.tick);
      const expected = new Cron('0 2 * * *', { timezone: 'Europe/Amsterdam' })
        .previousRuns(3)
        .map((tick) => tick.toISOString())
        .reverse();
      expect(ticks).toEqual(expected);
      for (const tick of ticks) expect(wallClock(tick, 'Europe/Amsterdam')).toBe('02:00:00');
    });
  });

  describe('definitions the application refuses to boot with', () => {
    const bed = useTestBed({ databasePerTest: true });
    const bootWith = (schedules: ScheduleDefinition[], providers: Array<new (...args: never[]) => unknown> = []) =>
      bed.bootFailure({ duraflow: { workflows: [sync, yearly], schedules }, providers });

    /** The error is the typed one, and nothing was written. */
    async function expectRefused<T extends DuraflowError>(
      error: unknown,
      type: abstract new (...args: never[]) => T,
      code: string,
    ): Promise<T> {
      expect(error).toBeInstanceOf(type);
      expect((error as T).code).toBe(code);
      expect(await bed.rows.count('agent_tasks')).toBe(0);
      const { rows } = await bed.db.client.query(
        `SELECT (SELECT count(*) FROM duraflow_schedules)::int AS schedules, (SELECT count(*) FROM duraflow_schedule_ticks)::int AS ticks`,
      );
      expect(rows[0]).toEqual({ schedules: 0, ticks: 0 });
      return error as T;
    }

    it('refuses a cron expression that does not parse', async () => {
      const error = await bootWith([{ name: 'bad-cron', workflow: 'yearly-report', cron: '61 * * * *' }]);
      const typed = await expectRefused(error, InvalidScheduleCronError, 'INVALID_SCHEDULE_CRON');
      expect(typed.message).toContain('"bad-cron"');
      expect(typed.message).toContain('"61 * * * *"');
      expect(typed.message).toContain('Use 5 fields');
    });

    it('refuses a cron expression that never ticks', async () => {
      const error = await bootWith([{ name: 'february-31', workflow: 'yearly-report', cron: '0 0 31 2 *' }]);
      expect((await expectRefused(error, InvalidScheduleCronError, 'INVALID_SCHEDULE_CRON')).message).toContain('never ticks');
    });

    it('refuses an unknown time zone', async () => {
      const error = await bootWith([{ name: 'on-mars', workflow: 'yearly-report', cron: '0 2 * * *', timezone: 'Mars/Olympus' }]);
      const typed = await expectRefused(error, UnknownScheduleTimezoneError, 'UNKNOWN_SCHEDULE_TIMEZONE');
      expect(typed.message).toContain('"Mars/Olympus"');
      expect(typed.message).toContain('Europe/Amsterdam');
    });

    it('refuses a schedule of a workflow the application does not register', async () => {
      const error = await bootWith([{ name: 'orphan', workflow: 'no-such-workflow', cron: '0 2 * * *' }]);
      const typed = await expectRefused(error, UnknownScheduleWorkflowError, 'UNKNOWN_SCHEDULE_WORKFLOW');
      expect(typed.message).toContain('"no-such-workflow"');
      expect(typed.message).toContain('"sync"');
    });

    it('refuses two schedules of one name, in forRoot or beside a workflow’s own', async () => {
      const twice = await bootWith([
        { name: 'twice', workflow: 'yearly-report', cron: '0 2 * * *' },
        { name: 'twice', workflow: 'sync', cron: '0 3 * * *', input: { source: 'a' } },
      ]);
      const typed = await expectRefused(twice, DuplicateScheduleError, 'DUPLICATE_SCHEDULE');
      expect(typed.message).toContain('forRoot({ schedules })[0] and forRoot({ schedules })[1]');

      const besideOwn = await bootWith([{ name: 'heartbeat-ping', workflow: 'yearly-report', cron: '0 2 * * *' }], [HeartbeatPingWorkflow]);
      const typedOwn = await expectRefused(besideOwn, DuplicateScheduleError, 'DUPLICATE_SCHEDULE');
      expect(typedOwn.message).toContain('HeartbeatPingWorkflow');
    });

    it('refuses an input the workflow’s DTO refuses', async () => {
      const error = await bootWith([{ name: 'bad-input', workflow: 'sync', cron: '0 2 * * *', input: { source: 42 } }]);
      const typed = await expectRefused(error, InvalidScheduleInputError, 'INVALID_SCHEDULE_INPUT');
      expect(typed.message).toContain('"bad-input"');
      expect(typed.message).toContain('source');
      expect(typed.cause).toMatchObject({ code: 'INVALID_INPUT' });
    });

    it('refuses a bad catch-up policy, a maxCatchUp out of range and a bad name', async () => {
      const policy = await bootWith([{ name: 'policy', workflow: 'yearly-report', cron: '0 2 * * *', catchUp: 'some' as never }]);
      expect((await expectRefused(policy, InvalidScheduleError, 'INVALID_SCHEDULE')).message).toContain("'latest', 'all' or 'none'");
      const bound = await bootWith([{ name: 'bound', workflow: 'yearly-report', cron: '0 2 * * *', catchUp: 'all', maxCatchUp: 5000 }]);
      expect((await expectRefused(bound, InvalidScheduleError, 'INVALID_SCHEDULE')).message).toContain('from 1 to 1000');
      const name = await bootWith([{ name: 'no spaces', workflow: 'yearly-report', cron: '0 2 * * *' }]);
      expect((await expectRefused(name, InvalidScheduleError, 'INVALID_SCHEDULE')).message).toContain('letters, digits');
    });
  });
});
