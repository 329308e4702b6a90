import { TaskNotFoundError, TaskStatus, UnknownStepError, WorkflowService } from '@duraflow/nestjs';
import { TestingModule } from '@nestjs/testing';
import { Gate } from './fixtures/steps/gate';
import { orderRun, runs, sagaRun } from './fixtures/steps/operated-runs';
import { SideEffects } from './fixtures/steps/side-effects';
import { useTestBed } from './support/test-bed';

/*
 * workflows.fork (issue 26, DESIGN.md semantics 16): a NEW task whose steps before `fromStep`
 * are copied from the original (never run), `fromStep` and what follows run anew. Step bodies
 * record each real run in `side_effects`, counted per task from outside the engine.
 */

const bed = useTestBed();
const WAIT = { timeoutMs: 30_000 };

function startApp(): Promise<TestingModule> {
  return bed.start({ duraflow: { workflows: [orderRun, sagaRun], worker: { shutdownTimeoutMs: 100 } } });
}

async function taskCount(): Promise<number> {
  return Number((await bed.db.client.query(`SELECT count(*) FROM agent_tasks`)).rows[0].count);
}

beforeAll(async () => {
  runs.effects = new SideEffects(bed.db.client);
  await runs.effects.createTable();
});

beforeEach(() => {
  runs.payFailuresLeft = 0;
  runs.shipGate = new Gate();
});

describe('workflows.fork', () => {
  it('makes a new task: the steps before fromStep copied (never run), fromStep and what follows run anew, linked both ways', async () => {
    const workflows = (await startApp()).get(WorkflowService);
    runs.payFailuresLeft = 2;
    const original = await workflows.submit('operated-order', { n: 7 });
    expect((await workflows.waitFor(original.id, WAIT)).status).toBe(TaskStatus.FAILED);

    const fork = await workflows.fork(original.id, { fromStep: 'pay' });
    expect(fork.id).not.toBe(original.id);
    expect(fork.forkedFrom).toEqual({ taskId: original.id, fromStep: 'pay' });
    expect(fork.input).toEqual({ n: 7 });
    expect(fork.copiedSteps).toBe(2); // `reserve` and the sleep `pause`
    const done = await workflows.waitFor(fork.id, WAIT);
    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(done.output).toMatchObject({ reserved: { reservation: 'r-7' }, paid: { paid: true, attempt: 1 } });
    expect(await runs.effects.count(fork.id, 'reserve')).toBe(0);
    expect(await runs.effects.count(fork.id, 'pay')).toBe(1);
    expect(await runs.effects.count(fork.id, 'ship')).toBe(1);
    // the original is untouched, and lists its fork
    expect((await workflows.get(original.id))!.status).toBe(TaskStatus.FAILED);
    expect((await workflows.list({ forkedFrom: original.id })).items.map((t) => t.id)).toEqual([fork.id]);
    expect((await workflows.get(original.id))!.forkedFrom).toBeNull();
    // And the original names its fork in its history.
    expect((await workflows.get(original.id))!.history).toEqual([
      { kind: 'forked', at: expect.any(String), forkId: fork.id, fromStep: 'pay' },
    ]);
  });

  it('takes a new input (checked as a submit) and copies nothing when forked from the first step', async () => {
    const workflows = (await startApp()).get(WorkflowService);
    const original = await workflows.submit('operated-order', { n: 1 });
    await workflows.waitFor(original.id, WAIT);
    const fork = await workflows.fork(original.id, { fromStep: 'reserve', input: { n: 2 } });
    expect(fork.copiedSteps).toBe(0);
    const done = await workflows.waitFor(fork.id, WAIT);
    expect(done.output).toMatchObject({ reserved: { reservation: 'r-2' } });
    expect(await runs.effects.count(fork.id, 'reserve')).toBe(1);
  });

  it('forks a rolled-back task', async () => {
    const workflows = (await startApp()).get(WorkflowService);
    runs.payFailuresLeft = 2;
    const original = await workflows.submit('operated-saga', {});
    expect((await workflows.waitFor(original.id, WAIT)).status).toBe(TaskStatus.ROLLED_BACK);
    expect(await runs.effects.count(original.id, 'undo-reserve')).toBe(1);
    const fork = await workflows.fork(original.id, { fromStep: 'pay' });
    expect((await workflows.waitFor(fork.id, WAIT)).status).toBe(TaskStatus.COMPLETED);
    expect(await runs.effects.count(fork.id, 'reserve')).toBe(0);
    expect(await runs.effects.count(fork.id, 'pay')).toBe(1);
  });

  it('forks a running task (its worker mid-step) without disturbing it', async () => {
    const workflows = (await startApp()).get(WorkflowService);
    const original = await workflows.submit('operated-order', { gate: true });
    await runs.shipGate.reached.promise;
    const fork = await workflows.fork(original.id, { fromStep: 'pay', input: { gate: false } });
    expect((await workflows.waitFor(fork.id, WAIT)).status).toBe(TaskStatus.COMPLETED);
    expect(await runs.effects.count(fork.id, 'reserve')).toBe(0);
    expect((await workflows.get(original.id))!.status).toBe(TaskStatus.RUNNING);
    runs.shipGate.open();
    expect((await workflows.waitFor(original.id, WAIT)).status).toBe(TaskStatus.COMPLETED);
    expect(await runs.effects.count(original.id, 'ship')).toBe(1);
  });

  it('refuses an unknown step key or task with a typed error and writes nothing', async () => {
    const workflows = (await startApp()).get(WorkflowService);
    const original = await workflows.submit('operated-order', {});
    await workflows.waitFor(original.id, WAIT);
    const before = await taskCount();
    const error = await workflows.fork(original.id, { fromStep: 'no-such-step' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnknownStepError);
    expect(error).toMatchObject({ code: 'FORK_STEP_UNKNOWN', stepKey: 'no-such-step' });
    await expect(workflows.fork('00000000-0000-4000-8000-000000000000', { fromStep: 'pay' })).rejects.toBeInstanceOf(TaskNotFoundError);
    await expect(workflows.fork(original.id, { fromStep: 'pay', version: 9 })).rejects.toMatchObject({ code: 'UNKNOWN_WORKFLOW_VERSION' });
    expect(await taskCount()).toBe(before);
  });
});
