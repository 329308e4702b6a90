import { TestingModule } from '@nestjs/testing';
import { randomUUID } from 'node:crypto';
import {
  DuraflowModuleOptions,
  InvalidSignalNameError,
  NotSerializableError,
  SignalPayloadTooLargeError,
  SignalTimeoutError,
  TaskAlreadyFinishedError,
  TaskNotFoundError,
  TaskStatus,
  WorkerService,
  WorkflowContext,
  WorkflowService,
  workflow,
} from '@duraflow/nestjs';
import { SUBMIT_ONLY, useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * ctx.waitForSignal / workflows.signal against PostgreSQL: a signal is kept until a wait takes
 * it (before or after the wait is reached), signals of one name are taken in order, one per
 * wait, the waiting task is pending and holds no slot, a timeout is a catchable
 * SignalTimeoutError, and bad input is refused with a typed error, writing nothing.
 */

const bed = useTestBed();
const undone: string[] = [];

const approval = workflow('approval', async (ctx: WorkflowContext) => {
  const decision = await ctx.waitForSignal<{ ok: boolean }>('approval');
  return { decision };
});

const threeItems = workflow('three-items', async (ctx: WorkflowContext) => {
  const items: unknown[] = [];
  for (let i = 0; i < 3; i++) items.push(await ctx.waitForSignal('item'));
  return items;
});

const patient = workflow('patient', async (ctx: WorkflowContext<{ timeoutMs: number }>) => {
  try {
    return { payload: await ctx.waitForSignal('go', { timeoutMs: ctx.input.timeoutMs }) };
  } catch (error) {
    if (error instanceof SignalTimeoutError) return { timedOut: true, code: error.code };
    throw error;
  }
});

const impatient = workflow(
  'impatient',
  async (ctx: WorkflowContext) => {
    await ctx.step.run('reserve', () => ({ reservation: 'r-1' }));
    await ctx.waitForSignal('confirm', { timeoutMs: 100 });
    return 'confirmed';
  },
  {
    compensations: {
      reserve: async () => {
        undone.push('reserve');
      },
    },
  },
);

const WORKFLOWS = [approval, threeItems, patient, impatient];

function startApp(duraflow: DuraflowModuleOptions = {}): Promise<TestingModule> {
  return bed.start({ duraflow: { ...duraflow, workflows: WORKFLOWS, worker: { shutdownTimeoutMs: 100, ...duraflow.worker } } });
}

async function signalRows(taskId: string) {
  const { rows } = await bed.db.client.query(`SELECT * FROM task_signals WHERE task_id = $1 ORDER BY id`, [taskId]);
  return rows;
}

async function waitingFor(taskId: string, key: string): Promise<boolean> {
  return (await bed.rows.steps(taskId)).some((step) => step.step_key === key && step.status === 'waiting');
}

describe('signals', () => {
  it('suspends the waiting task (pending, no slot, no worker) and resumes it at once with the payload (poll of 60 s)', async () => {
    const app = await startApp({ worker: { pollIntervalMs: 60_000 } });
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('approval');
    await eventually('the task waits', () => waitingFor(task.id, 'signal:approval#1'));
    expect(await bed.rows.task(task.id)).toMatchObject({ status: 'pending', worker_id: null, heartbeat_at: null });

    const sentAt = Date.now();
    const receipt = await workflows.signal(task.id, 'approval', { ok: true });
    const done = await workflows.waitFor(task.id, { timeoutMs: 10_000 });

    expect(receipt).toMatchObject({ taskId: task.id, name: 'approval', wokeTask: true });
    expect(done).toMatchObject({ status: 'completed', output: { decision: { ok: true } } });
    // The worker counts an outcome once its statement committed, which waitFor may see first.
    await eventually('the worker counted the completion', () => app.get(WorkerService).stats(), {
      until: (stats) => stats.completed === 1,
    });
    expect(app.get(WorkerService).stats()).toMatchObject({ suspended: 1, completed: 1 });
    expect(await signalRows(task.id)).toEqual([
      expect.objectContaining({ name: 'approval', payload: { ok: true }, consumed_by_step: 'signal:approval#1' }),
    ]);
    console.log(`signal sent -> task completed: ${Date.now() - sentAt} ms`);
  });

  it('hands a signal to the wait its suspended task is at in the send itself: the woken run finds the wait over', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('approval');
    await eventually('the task waits', () => waitingFor(task.id, 'signal:approval#1'));
    await app.get(WorkerService).stop();

    await workflows.signal(task.id, 'approval', { ok: 'sent' });

    // Settled by the send, before any worker claimed the task: the wait completed with the payload, the signal taken by it.
    const wait = (await bed.rows.steps(task.id)).find((step) => step.step_key === 'signal:approval#1');
    expect(wait).toMatchObject({ status: 'completed', output: { ok: 'sent' } });
    expect(wait!.completion_seq).not.toBeNull();
    expect(await signalRows(task.id)).toEqual([
      expect.objectContaining({ consumed_by_step: 'signal:approval#1', consumed_at: expect.any(Date) }),
    ]);
    expect(await bed.rows.task(task.id)).toMatchObject({ status: 'pending', worker_id: null });

    await app.get(WorkerService).start();
    expect(await workflows.waitFor(task.id, { timeoutMs: 10_000 })).toMatchObject({
      status: 'completed',
      output: { decision: { ok: 'sent' } },
    });
  });

  it('keeps a signal sent before the wait is reached, and delivers it when it is', async () => {
    const submitter = await startApp(SUBMIT_ONLY);
    const task = await submitter.get(WorkflowService).submit('approval');
    await submitter.get(WorkflowService).signal(task.id, 'approval', { ok: false });

    const worker = await startApp();
    const done = await worker.get(WorkflowService).waitFor(task.id, { timeoutMs: 10_000 });

    expect(done).toMatchObject({ status: 'completed', output: { decision: { ok: false } } });
    expect(worker.get(WorkerService).stats()).toMatchObject({ suspended: 0 });
  });

  it('delivers several signals of one name in the order they were sent, one per wait', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('three-items');
    await workflows.signal(task.id, 'item', 'a');
    await eventually('the second wait is reached', () => waitingFor(task.id, 'signal:item#2'));
    await workflows.signal(task.id, 'item', 'b');
    await workflows.signal(task.id, 'item', 'c');

    const done = await workflows.waitFor(task.id, { timeoutMs: 10_000 });

    expect(done.output).toEqual(['a', 'b', 'c']);
    expect((await signalRows(task.id)).map((row) => row.consumed_by_step)).toEqual(['signal:item#1', 'signal:item#2', 'signal:item#3']);
  });

  it('throws SignalTimeoutError past the timeout, which the workflow can catch; the signal that comes later is kept, not taken', async () => {
    const app = await startApp({ worker: { pollIntervalMs: 60_000 } });
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('patient', { timeoutMs: 150 });

    const done = await workflows.waitFor(task.id, { timeoutMs: 10_000 });

    expect(done).toMatchObject({ status: 'completed', output: { timedOut: true, code: 'SIGNAL_TIMEOUT' } });
    expect(await bed.rows.step(task.id, 'signal:go#1')).toMatchObject({
      kind: 'signal',
      status: 'failed',
      error: { code: 'SIGNAL_TIMEOUT' },
    });
    await expect(workflows.signal(task.id, 'go', 1)).rejects.toBeInstanceOf(TaskAlreadyFinishedError);
  });

  it('rolls the task back when the timeout is not caught (the saga undoes the completed steps)', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('impatient');

    const done = await workflows.waitFor(task.id, { timeoutMs: 10_000 });

    expect(done.status).toBe(TaskStatus.ROLLED_BACK);
    expect(done.error).toMatchObject({ code: 'SIGNAL_TIMEOUT' });
    expect(await bed.rows.compensatedStepKeys(task.id)).toEqual(['reserve']);
  });

  it('refuses bad input with a typed error and writes nothing', async () => {
    const app = await startApp({ worker: { enabled: false }, maxInputBytes: 1024 });
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('approval');
    const finished = await workflows.submit('approval');
    await workflows.cancel(finished.id);
    const before = await bed.rows.task(task.id);

    await expect(workflows.signal(randomUUID(), 'approval', 1)).rejects.toBeInstanceOf(TaskNotFoundError);
    await expect(workflows.signal('not-a-uuid', 'approval', 1)).rejects.toMatchObject({ code: 'TASK_NOT_FOUND' });
    await expect(workflows.signal(finished.id, 'approval', 1)).rejects.toMatchObject({
      code: 'TASK_ALREADY_FINISHED',
      status: 'cancelled',
    });
    await expect(workflows.signal(task.id, 'no spaces', 1)).rejects.toBeInstanceOf(InvalidSignalNameError);
    await expect(workflows.signal(task.id, '', 1)).rejects.toMatchObject({ code: 'INVALID_SIGNAL_NAME' });
    await expect(workflows.signal(task.id, 'approval', { n: BigInt(1) })).rejects.toBeInstanceOf(NotSerializableError);
    await expect(workflows.signal(task.id, 'approval', { f: () => 1 })).rejects.toMatchObject({ code: 'NOT_SERIALIZABLE' });
    await expect(workflows.signal(task.id, 'approval', 'x'.repeat(2_000))).rejects.toBeInstanceOf(SignalPayloadTooLargeError);

    expect(await signalRows(task.id)).toEqual([]);
    expect(await signalRows(finished.id)).toEqual([]);
    expect(await bed.rows.task(task.id)).toEqual(before);
  });

  it('cancels a waiting task at once', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('approval');
    await eventually('the task waits', () => waitingFor(task.id, 'signal:approval#1'));

    const cancelled = await workflows.cancel(task.id);

    expect(cancelled.status).toBe(TaskStatus.CANCELLED);
    await expect(workflows.signal(task.id, 'approval', { ok: true })).rejects.toBeInstanceOf(TaskAlreadyFinishedError);
  });

  it('settles a signal racing its wait’s timeout exactly one way: delivered and consumed, or timed out and kept', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const outcomes: string[] = [];
    for (let round = 0; round < 12; round++) {
      const task = await workflows.submit('patient', { timeoutMs: 100 });
      await eventually('the task waits', () => waitingFor(task.id, 'signal:go#1'));
      await new Promise((resolve) => setTimeout(resolve, 60 + round * 6));
      await workflows.signal(task.id, 'go', { round }).catch((error: unknown) => {
        // The task may have timed out and finished before the signal came: refused, nothing kept.
        if (!(error instanceof TaskAlreadyFinishedError)) throw error;
      });
      const done = await workflows.waitFor(task.id, { timeoutMs: 10_000 });
      const output = done.output as { payload?: unknown; timedOut?: boolean };
      const signals = await signalRows(task.id);
      const wait = await bed.rows.step(task.id, 'signal:go#1');
      if (output.timedOut) {
        expect(wait).toMatchObject({ status: 'failed', error: { code: 'SIGNAL_TIMEOUT' } });
        expect(signals.every((row) => row.consumed_at === null)).toBe(true);
        outcomes.push('timed out');
      } else {
        expect(output).toEqual({ payload: { round } });
        expect(wait).toMatchObject({ status: 'completed', output: { round } });
        expect(signals).toEqual([expect.objectContaining({ consumed_by_step: 'signal:go#1' })]);
        outcomes.push('delivered');
      }
    }
    console.log(`signal vs timeout, 12 rounds: ${outcomes.join(', ')}`);
  });
});
