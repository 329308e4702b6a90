import {
  InvalidSubmitOptionsError,
  TaskStatus,
  workflow,
  WorkflowContext,
  WorkflowService,
  FunctionalWorkflowDefinition,
} from '@duraflow/nestjs';
import { CapturedLogs } from './support/captured-logs';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * A durable wait's due time is at most 9999-12-31T00:00:00Z (and not before year 1): a call
 * past it (a sleep of 8e15 ms, a signal wait with such a timeout, a date in year 255000) throws
 * InvalidPrimitiveCallError into the run at the call, so the task fails at once with one log
 * line, instead of a run that can record nothing, ends `unrecorded` in silence, and is reaped
 * until MAX_RETRIES_EXCEEDED. A child's or a submit's `scheduledAt` is held to the same years.
 */

const bed = useTestBed({ databasePerTest: true });

const FAR = 8e15;
const WORKFLOWS: FunctionalWorkflowDefinition[] = [
  workflow('huge-sleep', async (ctx: WorkflowContext) => ctx.sleep('nap', FAR)),
  workflow('huge-sleep-until', async (ctx: WorkflowContext) => ctx.sleepUntil('at', new Date(FAR))),
  workflow('ancient-sleep-until', async (ctx: WorkflowContext) => ctx.sleepUntil('at', new Date(-FAR))),
  workflow('huge-signal-timeout', async (ctx: WorkflowContext) => ctx.waitForSignal('go', { timeoutMs: FAR })),
  workflow('huge-child-schedule', async (ctx: WorkflowContext) => ctx.startChild('c', 'echo', {}, { scheduledAt: new Date(FAR) })),
  workflow('echo', async (ctx: WorkflowContext) => ctx.input),
  workflow('boom-step', async (ctx: WorkflowContext) => ctx.step.run('boom', () => 1)),
];

async function startApp() {
  const app = await bed.start({ duraflow: { workflows: WORKFLOWS, maxRetries: 3 } });
  const logs = new CapturedLogs();
  app.useLogger(logs);
  return { workflows: app.get(WorkflowService), logs };
}

describe('durable waits past year 9999', () => {
  it.each([
    ['huge-sleep', 'ctx.sleep("nap"'],
    ['huge-sleep-until', 'ctx.sleepUntil("at"'],
    ['ancient-sleep-until', 'ctx.sleepUntil("at"'],
    ['huge-signal-timeout', 'ctx.waitForSignal("go")'],
  ])('fail %s at once with INVALID_PRIMITIVE_CALL, one log line, no recovery', async (name, call) => {
    const { workflows, logs } = await startApp();
    const task = await workflows.submit(name);
    const done = await workflows.waitFor(task.id, { timeoutMs: 20_000 });
    expect(done).toMatchObject({ status: TaskStatus.FAILED, retryCount: 0 });
    expect(done.error).toMatchObject({ code: 'INVALID_PRIMITIVE_CALL', message: expect.stringContaining(call) });
    expect(await bed.rows.steps(task.id)).toEqual([]);
    const lines = logs.lines.filter((line) => line.includes(task.id));
    expect(lines).toEqual([expect.stringMatching(/^WARN .*ended failed: INVALID_PRIMITIVE_CALL/)]);
  });

  it("fails a run whose child's scheduledAt is past year 9999 with INVALID_SUBMIT_OPTIONS, and starts no child", async () => {
    const { workflows, logs } = await startApp();
    const task = await workflows.submit('huge-child-schedule');
    const done = await workflows.waitFor(task.id, { timeoutMs: 20_000 });
    expect(done).toMatchObject({ status: TaskStatus.FAILED, retryCount: 0, error: { code: 'INVALID_SUBMIT_OPTIONS' } });
    expect(await bed.rows.count('agent_tasks')).toBe(1);
    expect(logs.lines.filter((line) => line.includes(task.id))).toHaveLength(1);
  });

  it('refuses a submit scheduled past year 9999 or before year 1, and writes nothing', async () => {
    const { workflows } = await startApp();
    for (const scheduledAt of [new Date(FAR), new Date(-FAR), '+275760-09-13T00:00:00.000Z']) {
      await expect(workflows.submit('echo', {}, { scheduledAt })).rejects.toBeInstanceOf(InvalidSubmitOptionsError);
    }
    expect(await bed.rows.count('agent_tasks')).toBe(0);
  });

  it('still takes a wait due late in year 9999 and a date long past', async () => {
    const { workflows } = await startApp();
    const inTime = await workflows.submit('echo', {}, { scheduledAt: new Date('9999-12-30T00:00:00Z') });
    expect((await bed.rows.task(inTime.id)).scheduled_at).toEqual(new Date('9999-12-30T00:00:00Z'));
  });
});

describe('a run whose write fails', () => {
  it('says so in a log line when it ends unrecorded (left to recovery)', async () => {
    // A checkpoint PostgreSQL refuses for good: what a run meets when its write is wrong, not the database down.
    await bed.db.client.query(`ALTER TABLE step_runs ADD CONSTRAINT refuse_boom CHECK (step_key <> 'boom')`);
    const { workflows, logs } = await startApp();
    const task = await workflows.submit('boom-step');
    const line = await eventually('the unrecorded run is logged', () => logs.lines.find((text) => text.includes(task.id)));
    expect(line).toMatch(/^WARN .*stopped: a write of its run failed \(.*refuse_boom.*\); it will be recovered\./);
  });
});
