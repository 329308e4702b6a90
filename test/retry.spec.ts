import { TaskNotFoundError, TaskNotRetryableError, TaskStatus, WorkflowService } from '@duraflow/nestjs';
import { TestingModule } from '@nestjs/testing';
import { Gate } from './fixtures/steps/gate';
import { orderRun, runs, sagaRun } from './fixtures/steps/operated-runs';
import { SideEffects } from './fixtures/steps/side-effects';
import { useTestBed } from './support/test-bed';

/*
 * workflows.retry (issue 26, DESIGN.md semantics 16): a failed task, or a cancelled one not
 * compensated, runs again from where it stopped. Step bodies record each real run in
 * `side_effects`, so "never re-run" is counted from outside the engine.
 */

const bed = useTestBed();
const WAIT = { timeoutMs: 30_000 };

function startApp(worker = true): Promise<TestingModule> {
  return bed.start({
    duraflow: { workflows: [orderRun, sagaRun], worker: { enabled: worker, shutdownTimeoutMs: 100 } },
  });
}

beforeAll(async () => {
  runs.effects = new SideEffects(bed.db.client);
  await runs.effects.createTable();
});

beforeEach(() => {
  runs.payFailuresLeft = 0;
  runs.shipGate = new Gate();
});

describe('workflows.retry', () => {
  it('runs a failed task again from where it stopped: completed steps kept, the failed step with its full attempts, history kept', async () => {
    const workflows = (await startApp()).get(WorkflowService);
    runs.payFailuresLeft = 2; // both attempts of `pay` fail
    const task = await workflows.submit('operated-order', { n: 1 });
    const failed = await workflows.waitFor(task.id, WAIT);
    expect(failed.status).toBe(TaskStatus.FAILED);
    expect(failed.error).toMatchObject({ stepKey: 'pay' });
    expect(await runs.effects.count(task.id, 'pay')).toBe(2);

    runs.payFailuresLeft = 1; // the first attempt after the retry fails too: the second must still run
    const retried = await workflows.retry(task.id);
    expect(retried.id).toBe(task.id);
    expect(retried.history).toEqual([
      expect.objectContaining({ kind: 'retried', fromStatus: 'failed', error: expect.objectContaining({ stepKey: 'pay' }) }),
    ]);
    expect(retried.retryCount).toBe(0);
    const done = await workflows.waitFor(task.id, WAIT);
    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(await runs.effects.count(task.id, 'reserve')).toBe(1);
    expect(await runs.effects.count(task.id, 'pay')).toBe(4);
    expect(await runs.effects.count(task.id, 'ship')).toBe(1);
    expect(done.output).toMatchObject({ reserved: { reservation: 'r-1' }, paid: { paid: true } });
    expect(done.error).toBeNull();
    expect(done.history).toHaveLength(1);
  });

  it('gives a task that failed with its retries used up its full retries again (retry counter reset)', async () => {
    const workflows = (await startApp(false)).get(WorkflowService);
    const task = await workflows.submit('operated-order', {});
    await bed.db.client.query(
      `UPDATE agent_tasks SET status = 'failed', retry_count = max_retries, completed_at = now(),
              error = '{"name":"Error","message":"gave up","code":"MAX_RETRIES_EXCEEDED"}' WHERE id = $1`,
      [task.id],
    );
    const retried = await workflows.retry(task.id);
    expect(retried).toMatchObject({ status: TaskStatus.PENDING, retryCount: 0, error: null, completedAt: null });
    expect(retried.history?.[0]).toMatchObject({ fromStatus: 'failed', error: { code: 'MAX_RETRIES_EXCEEDED' } });
    const done = await (await startApp()).get(WorkflowService).waitFor(task.id, WAIT);
    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(done.output).toMatchObject({ attempt: 1 });
  });

  it('runs a cancelled task whose steps were not compensated again', async () => {
    const workflows = (await startApp(false)).get(WorkflowService);
    const task = await workflows.submit('operated-order', {});
    await workflows.cancel(task.id);
    const retried = await workflows.retry(task.id);
    expect(retried.status).toBe(TaskStatus.PENDING);
    expect(retried.history).toEqual([expect.objectContaining({ kind: 'retried', fromStatus: 'cancelled' })]);
  });

  it('refuses any other state with TaskNotRetryableError naming the status, and writes nothing', async () => {
    const workflows = (await startApp()).get(WorkflowService);
    const completed = await workflows.submit('operated-order', {});
    await workflows.waitFor(completed.id, WAIT);
    runs.payFailuresLeft = 2;
    const rolledBack = await workflows.submit('operated-saga', {});
    expect((await workflows.waitFor(rolledBack.id, WAIT)).status).toBe(TaskStatus.ROLLED_BACK);
    runs.shipGate = new Gate();
    const running = await workflows.submit('operated-order', { gate: true });
    await runs.shipGate.reached.promise;

    for (const [id, status] of [
      [completed.id, 'completed'],
      [rolledBack.id, 'rolled_back'],
      [running.id, 'running'],
    ]) {
      const before = await bed.rows.task(id);
      const error = await workflows.retry(id).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TaskNotRetryableError);
      expect(error).toMatchObject({ code: 'TASK_NOT_RETRYABLE', status });
      expect((error as Error).message).toContain(`"${status}"`);
      expect(await bed.rows.task(id)).toEqual(before);
    }
    await expect(workflows.retry('00000000-0000-4000-8000-000000000000')).rejects.toBeInstanceOf(TaskNotFoundError);
    runs.shipGate.open();
  });

  it('refuses a held task (resume is its move)', async () => {
    const workflows = (await startApp(false)).get(WorkflowService);
    const task = await workflows.submit('operated-order', {});
    await bed.db.client.query(`UPDATE agent_tasks SET held_at = now() WHERE id = $1`, [task.id]);
    await expect(workflows.retry(task.id)).rejects.toMatchObject({ code: 'TASK_NOT_RETRYABLE', status: 'pending' });
  });

  it('changes the task once when 20 retries race (and when a retry races a cancel)', async () => {
    const workflows = (await startApp(false)).get(WorkflowService);
    const task = await workflows.submit('operated-order', {});
    await workflows.cancel(task.id);
    const outcomes = await Promise.allSettled(Array.from({ length: 20 }, () => workflows.retry(task.id)));
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
    for (const o of outcomes.filter((o) => o.status === 'rejected')) {
      expect((o as PromiseRejectedResult).reason).toBeInstanceOf(TaskNotRetryableError);
    }
    expect((await workflows.get(task.id))!.history).toHaveLength(1);

    // cancel and retry race: whatever the order, the history records at most this one more retry.
    const [cancelled, retried] = await Promise.allSettled([workflows.cancel(task.id), workflows.retry(task.id)]);
    expect(cancelled.status).toBe('fulfilled');
    const history = (await workflows.get(task.id))!.history!;
    expect(history.length).toBe(retried.status === 'fulfilled' ? 2 : 1);
  });
});
