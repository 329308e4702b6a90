import { DataSource } from 'typeorm';
import { getDataSourceToken } from '@nestjs/typeorm';
import { InvalidSubmitOptionsError, ScheduleDefinition, TaskStatus, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { childIdempotencyKey, scheduleIdempotencyKey } from '../libs/duraflow/src/domain/reserved-keys';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * The idempotency keys the library gives its own tasks (`duraflow-child:<parent>:<hash>` for a
 * parent's child, `schedule:<name>:<tick>` for a schedule's tick) belong to the library: no
 * submit may take one, a parent never adopts a task that is not its step's child, and a tick
 * never takes a task it did not create for its run.
 */

const bed = useTestBed({ databasePerTest: true });

/** Waits for signal `go`, then runs its child: the window in which a submitter could plant the child's key. */
const parent = workflow('parent', async (ctx: WorkflowContext) => {
  await ctx.waitForSignal('go');
  return ctx.runChild('ship', 'shipping', { real: true });
});
const shipping = workflow('shipping', async (ctx: WorkflowContext<Record<string, unknown>>) => ({ shipped: ctx.input }));
const yearly = workflow('yearly-report', async (ctx: WorkflowContext) => ({ reported: ctx.input }));

const FAR_FUTURE = new Date('2099-01-01T00:00:00Z');

/** A task written past the library under `key`, as a submit made before the prefixes were reserved left it. */
async function plantTask(workflowName: string, key: string, input: object): Promise<string> {
  const { rows } = await bed.db.client.query(
    `INSERT INTO agent_tasks (workflow_name, input, idempotency_key, scheduled_at, max_retries) VALUES ($1, $2, $3, $4, 3) RETURNING id`,
    [workflowName, JSON.stringify(input), key, FAR_FUTURE],
  );
  return rows[0].id;
}

describe('reserved idempotency keys', () => {
  it('refuses a key starting with "duraflow-child:" or "schedule:" in submit, in a transaction, and writes nothing', async () => {
    const app = await bed.start({ duraflow: { workflows: [shipping], worker: { enabled: false } } });
    const workflows = app.get(WorkflowService);
    const keys = ['duraflow-child:00000000-0000-4000-8000-000000000000:abc', 'schedule:nightly:2030-01-01T00:00:00.000Z'];
    for (const idempotencyKey of keys) {
      const refused = workflows.submit('shipping', {}, { idempotencyKey });
      await expect(refused).rejects.toBeInstanceOf(InvalidSubmitOptionsError);
      await expect(refused).rejects.toMatchObject({ code: 'INVALID_SUBMIT_OPTIONS', option: 'idempotencyKey' });
      const dataSource = app.get<DataSource>(getDataSourceToken());
      await expect(
        dataSource.transaction((manager) => workflows.submit('shipping', {}, { idempotencyKey, manager })),
      ).rejects.toBeInstanceOf(InvalidSubmitOptionsError);
    }
    // A key that only contains the words elsewhere is the caller's.
    await workflows.submit('shipping', {}, { idempotencyKey: 'order-1:schedule:duraflow-child:' });
    expect(await bed.rows.count('agent_tasks')).toBe(1);
  });

  it("never lets a submitter's task become a parent's child: the submit is refused and the parent runs its own child", async () => {
    const app = await bed.start({ duraflow: { workflows: [parent, shipping] } });
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('parent');
    await eventually('the parent waits for its signal', async () => (await bed.rows.steps(task.id)).length === 1 || undefined);

    const key = childIdempotencyKey(task.id, 'ship');
    await expect(workflows.submit('shipping', { attacker: true }, { idempotencyKey: key, scheduledAt: FAR_FUTURE })).rejects.toMatchObject({
      code: 'INVALID_SUBMIT_OPTIONS',
    });
    await workflows.signal(task.id, 'go');
    const done = await workflows.waitFor(task.id, { timeoutMs: 30_000 });
    expect(done).toMatchObject({ status: TaskStatus.COMPLETED, output: { shipped: { real: true } } });
  });

  it('fails the parent with CHILD_KEY_TAKEN, and adopts nothing, when a task that is not its child already holds the key', async () => {
    const app = await bed.start({ duraflow: { workflows: [parent, shipping] } });
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('parent');
    await eventually('the parent waits for its signal', async () => (await bed.rows.steps(task.id)).length === 1 || undefined);
    const planted = await plantTask('shipping', childIdempotencyKey(task.id, 'ship'), { attacker: true });

    await workflows.signal(task.id, 'go');
    const done = await workflows.waitFor(task.id, { timeoutMs: 30_000 });
    expect(done.status).toBe(TaskStatus.FAILED);
    expect(done.error).toMatchObject({ code: 'CHILD_KEY_TAKEN', message: expect.stringContaining(planted) });
    expect((await bed.rows.steps(task.id)).map((step) => step.step_key)).toEqual(['signal:go#1']);
    expect(await bed.rows.task(planted)).toMatchObject({ status: 'pending', parent_task_id: null, input: { attacker: true } });
  });

  it("runs a schedule's tick although a task it did not create holds the tick's key", async () => {
    const schedule: ScheduleDefinition = { name: 'yearly', workflow: 'yearly-report', cron: '0 0 1 1 *', input: { from: 'schedule' } };
    await bed.db.client.query(
      `INSERT INTO duraflow_schedules (name, workflow_name, cron, timezone, last_tick_at) VALUES ($1, $2, $3, 'UTC', $4)`,
      [schedule.name, schedule.workflow, schedule.cron, new Date('2019-06-01T00:00:00Z')],
    );
    // The tick the catch-up starts at boot: the newest new year ('latest', the default).
    const tick = new Date(Date.UTC(new Date().getUTCFullYear(), 0, 1));
    const planted = await plantTask('yearly-report', scheduleIdempotencyKey(schedule.name, tick), { from: 'attacker' });

    const app = await bed.start({ duraflow: { workflows: [yearly], schedules: [schedule] } });
    const { rows } = await bed.db.client.query(`SELECT tick_at, task_id FROM duraflow_schedule_ticks WHERE schedule_name = $1`, [
      schedule.name,
    ]);
    expect(rows.map((row) => (row.tick_at as Date).toISOString())).toEqual([tick.toISOString()]);
    const tickTask = rows[0].task_id as string;
    expect(tickTask).not.toBe(planted);
    const done = await app.get(WorkflowService).waitFor(tickTask, { timeoutMs: 30_000 });
    expect(done).toMatchObject({ status: TaskStatus.COMPLETED, input: { from: 'schedule' } });
    expect(await bed.rows.task(planted)).toMatchObject({ status: 'pending', input: { from: 'attacker' } });
  });
});
