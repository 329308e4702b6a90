import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import {
  DeadLetterBusyError,
  DeadLetterNotFoundError,
  DeadLetterOrphanedError,
  DeadLetterTaskActiveError,
  InvalidCursorError,
  InvalidListOptionsError,
  SagaService,
  TaskStatus,
} from '@duraflow/nestjs';
import { chainLink, writeCrashedRun } from './fixtures/saga/crashed-run';
import { scenario, VendorError } from './fixtures/saga/scenario';
import { TRIP } from './fixtures/saga/workflows';
import { Gate } from './fixtures/steps/gate';
import { FIND_FAILED_COMPENSATIONS } from './fixtures/schema/seed-queries';
import { partialRollback, startSagaApp, STEP_FAILED_BY_BREAK, useSagaBed } from './fixtures/saga/saga-bed';
import { runToEnd } from './support/run-to-end';
import { SUBMIT_ONLY } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * The dead-letter queue against PostgreSQL: a compensation that failed for good waits there
 * until a person retries it (with its step's saved output) or discards it; the last one gone
 * makes a partial rollback rolled_back. Listing, concurrent retries and the seed's "Find failed
 * compensations" query.
 */

describe('saga: the dead-letter queue', () => {
  const bed = useSagaBed();

  /** Sessions on the test database blocked on a lock right now. */
  async function sessionsWaitingForLocks(): Promise<number> {
    return (
      await bed.db.client.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      )
    ).rows[0].n;
  }

  it('lists dead letters newest first in keyset pages, optionally of one task', async () => {
    const app = await startSagaApp(bed);
    const saga = app.get(SagaService);
    const five = await partialRollback(bed, app, 5);
    const one = await partialRollback(bed, app, 1);

    const pages = [];
    let cursor: string | undefined;
    do {
      const page = await saga.listDeadLetters({ taskId: five.task.id, limit: 2, cursor });
      pages.push(page.items);
      cursor = page.nextCursor ?? undefined;
    } while (cursor);

    expect(pages.map((items) => items.length)).toEqual([2, 2, 1]);
    const listed = pages.flat();
    expect(listed.map((entry) => entry.id)).toEqual(five.deadLetters.map((row) => row.id));
    // The last compensation to fail (link-1, undone last) is the newest entry.
    expect(five.deadLetters.map((row) => row.step_key)).toEqual(['link-1', 'link-2', 'link-3', 'link-4', 'link-5']);
    expect(listed[0]).toMatchObject({
      taskId: five.task.id,
      stepId: five.deadLetters[0].step_id,
      retryCount: 0,
      error: expect.objectContaining({ stepKey: 'link-1', name: 'VendorError', message: 'could not undo link-1', attempt: 3 }),
    });
    expect(listed[0].createdAt).toBeInstanceOf(Date);

    const everything = await saga.listDeadLetters();
    expect(everything.items.map((entry) => entry.id)).toEqual([one.deadLetters[0].id, ...five.deadLetters.map((row) => row.id)]);
    expect(everything.nextCursor).toBeNull();
    const { items, nextCursor } = await saga.listDeadLetters({ taskId: one.task.id });
    expect(items.map((entry) => entry.id)).toEqual([one.deadLetters[0].id]);
    expect(nextCursor).toBeNull();
  });

  it('rejects a bad limit, taskId or cursor with a typed error', async () => {
    const app = await startSagaApp(bed, { duraflow: SUBMIT_ONLY });
    const saga = app.get(SagaService);

    for (const limit of [0, 1001, 2.5, Number.NaN, '2' as unknown as number]) {
      await expect(saga.listDeadLetters({ limit })).rejects.toMatchObject({ code: 'INVALID_LIST_OPTIONS' });
    }
    await expect(saga.listDeadLetters({ taskId: 'task-1' })).rejects.toBeInstanceOf(InvalidListOptionsError);
    await expect(saga.listDeadLetters({ cursor: 'not-a-cursor' })).rejects.toBeInstanceOf(InvalidCursorError);
    await expect(saga.listDeadLetters({ cursor: 'not-a-cursor' })).rejects.toMatchObject({ code: 'INVALID_CURSOR' });
    expect(await saga.listDeadLetters({ limit: 1000 })).toEqual({ items: [], nextCursor: null });
  });

  it('retries a dead letter with its saved output: the entry goes, compensated_at is set, the last one makes the task rolled_back', async () => {
    const app = await startSagaApp(bed);
    const saga = app.get(SagaService);
    const { task, deadLetters } = await partialRollback(bed, app, 2);
    expect(deadLetters.map((row) => row.step_key)).toEqual(['link-1', 'link-2']);
    const saved = await bed.rows.steps(task.id);

    const first = await saga.retryDeadLetter(deadLetters[0].id);

    expect(first).toMatchObject({ outcome: 'compensated', deadLetter: null });
    expect(Object.keys(first).sort()).toEqual(['deadLetter', 'outcome', 'task']);
    expect(first.task?.status).toBe(TaskStatus.PARTIAL_ROLLBACK);
    const call = scenario.undoCallsOf(task.id).at(-1)!;
    expect(call).toMatchObject({ stepKey: 'link-1', outcome: 'undone', attempt: 1 });
    expect(call.output).toStrictEqual(saved.find((step) => step.step_key === 'link-1').output);
    expect((await bed.rows.step(task.id, 'link-1')).compensated_at).not.toBeNull();
    expect((await bed.rows.deadLetters(task.id)).map((row) => row.id)).toEqual([deadLetters[1].id]);
    expect((await bed.rows.task(task.id)).status).toBe('partial_rollback');

    const second = await saga.retryDeadLetter(deadLetters[1].id);

    expect(second.outcome).toBe('compensated');
    expect(second.task?.status).toBe(TaskStatus.ROLLED_BACK);
    expect(await bed.rows.deadLetters(task.id)).toEqual([]);
    expect(await bed.rows.compensatedStepKeys(task.id)).toEqual(['link-1', 'link-2']);
    expect((await bed.rows.task(task.id)).error).toEqual(task.error);
  });

  it('retries with the saved output of the step, undefined and null kept apart', async () => {
    const app = await startSagaApp(bed);
    const saga = app.get(SagaService);
    scenario.undo('nothing', { fails: 'always' });
    scenario.undo('json-null', { fails: 'always' });
    const task = await runToEnd(app, 'keepsakes');
    expect(task.status).toBe(TaskStatus.PARTIAL_ROLLBACK);
    scenario.undo('nothing', undefined);
    scenario.undo('json-null', undefined);

    for (const row of await bed.rows.deadLetters(task.id)) await saga.retryDeadLetter(row.id);

    const retried = scenario
      .undoCallsOf(task.id)
      .filter((call) => call.outcome === 'undone' && ['nothing', 'json-null'].includes(call.stepKey));
    expect(retried.map((call) => [call.stepKey, call.output])).toEqual([
      ['json-null', null],
      ['nothing', undefined],
    ]);
    expect(retried.find((call) => call.stepKey === 'nothing')!.output).toBeUndefined();
    expect((await bed.rows.task(task.id)).status).toBe('rolled_back');
  });

  it('keeps a dead letter whose retry fails again, counting the retry and keeping the new error', async () => {
    const app = await startSagaApp(bed);
    const saga = app.get(SagaService);
    const { task, deadLetters } = await partialRollback(bed, app, 1);
    let refusals = 0;
    scenario.undo('link-1', { fails: 'always', error: () => new VendorError('RefundError', `refund refused (${++refusals})`) });

    const first = await saga.retryDeadLetter(deadLetters[0].id);
    const second = await saga.retryDeadLetter(deadLetters[0].id);

    expect(first.outcome).toBe('failed');
    expect(first.deadLetter).toMatchObject({ id: deadLetters[0].id, retryCount: 1 });
    expect(first.deadLetter?.error).toMatchObject({ message: 'refund refused (1)', name: 'RefundError', stepKey: 'link-1', attempt: 1 });
    expect(second.deadLetter).toMatchObject({ id: deadLetters[0].id, retryCount: 2 });
    expect(second.task?.status).toBe(TaskStatus.PARTIAL_ROLLBACK);
    const [row] = await bed.rows.deadLetters(task.id);
    expect(row).toMatchObject({ id: deadLetters[0].id, retry_count: 2 });
    expect(row.error).toMatchObject({ message: 'refund refused (2)', stack: expect.stringContaining('RefundError: refund refused (2)') });
    expect((await bed.rows.step(task.id, 'link-1')).compensated_at).toBeNull();
  });

  it('throws DeadLetterNotFoundError for an unknown id and writes nothing', async () => {
    const app = await startSagaApp(bed);
    const saga = app.get(SagaService);
    const { task } = await partialRollback(bed, app, 1);
    const before = { deadLetters: await bed.rows.deadLetters(), task: await bed.rows.task(task.id), calls: scenario.undoCalls.length };

    for (const id of [randomUUID(), 'not-an-id']) {
      await expect(saga.retryDeadLetter(id)).rejects.toBeInstanceOf(DeadLetterNotFoundError);
      await expect(saga.retryDeadLetter(id)).rejects.toMatchObject({ code: 'DEAD_LETTER_NOT_FOUND' });
      await expect(saga.discardDeadLetter(id)).rejects.toBeInstanceOf(DeadLetterNotFoundError);
    }

    expect(await bed.rows.deadLetters()).toEqual(before.deadLetters);
    expect(await bed.rows.task(task.id)).toEqual(before.task);
    expect(scenario.undoCalls).toHaveLength(before.calls);
  });

  it('runs the compensation once when one dead letter is retried twice at once: the other call gets DeadLetterBusyError', async () => {
    const app = await startSagaApp(bed);
    const saga = app.get(SagaService);
    const { task, deadLetters } = await partialRollback(bed, app, 1);
    const gate = new Gate();
    scenario.undo('link-1', { waitsAt: gate });
    const callsBefore = scenario.undoCalls.length;

    const retries = [saga.retryDeadLetter(deadLetters[0].id), saga.retryDeadLetter(deadLetters[0].id)];
    const settled = Promise.allSettled(retries);
    await gate.reached.promise;
    // One retry holds the entry while its compensation waits at the gate; the other is turned away.
    const turnedAway = await Promise.race(
      retries.map((retry) =>
        retry.then(
          () => 'resolved',
          (error: unknown) => error,
        ),
      ),
    );
    expect(turnedAway).toBeInstanceOf(DeadLetterBusyError);
    expect(turnedAway).toMatchObject({ code: 'DEAD_LETTER_BUSY' });
    gate.open();
    const results = await settled;

    expect(results.filter((result) => result.status === 'fulfilled')).toEqual([
      { status: 'fulfilled', value: expect.objectContaining({ outcome: 'compensated' }) },
    ]);
    expect(scenario.undoCalls.length - callsBefore).toBe(1);
    expect(await bed.rows.deadLetters()).toEqual([]);
    expect((await bed.rows.task(task.id)).status).toBe('rolled_back');
  });

  it('rolls the task back when its last two dead letters are retried at the same time', async () => {
    const app = await startSagaApp(bed);
    const saga = app.get(SagaService);
    const { task, deadLetters } = await partialRollback(bed, app, 2);

    // The test holds both steps' rows, so each retry stops in its transaction with its
    // compensation done and its entry deleted; then both are let go at the same instant.
    const holder = new Client({ connectionString: bed.db.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM step_runs WHERE task_id = $1 FOR UPDATE`, [task.id]);
      const retries = deadLetters.map((row) => saga.retryDeadLetter(row.id));
      await eventually('both retries wait for a lock', async () => (await sessionsWaitingForLocks()) === 2);
      await holder.query('ROLLBACK');
      const results = await Promise.all(retries);
      expect(results.map((result) => result.outcome)).toEqual(['compensated', 'compensated']);
    } finally {
      await holder.end();
    }

    expect(scenario.undone(task.id)).toHaveLength(2);
    expect(await bed.rows.deadLetters()).toEqual([]);
    expect((await bed.rows.task(task.id)).status).toBe('rolled_back');
  });

  it('discards a dead letter without running its compensation; the task is rolled_back once none is left', async () => {
    const app = await startSagaApp(bed);
    const saga = app.get(SagaService);
    const { task, deadLetters } = await partialRollback(bed, app, 2);
    const calls = scenario.undoCalls.length;

    const afterFirst = await saga.discardDeadLetter(deadLetters[0].id);
    expect(afterFirst?.status).toBe(TaskStatus.PARTIAL_ROLLBACK);
    const afterSecond = await saga.discardDeadLetter(deadLetters[1].id);

    expect(afterSecond?.status).toBe(TaskStatus.ROLLED_BACK);
    expect(scenario.undoCalls).toHaveLength(calls);
    expect(await bed.rows.deadLetters()).toEqual([]);
    // The engine did not undo these steps: compensated_at stays empty.
    expect(await bed.rows.compensatedStepKeys(task.id)).toEqual([]);
    await expect(saga.retryDeadLetter(deadLetters[0].id)).rejects.toBeInstanceOf(DeadLetterNotFoundError);
  });

  it('refuses to discard a dead letter while its task is still rolling back (the rollback would run it again)', async () => {
    const { taskId, stepIds } = await writeCrashedRun(bed.db.client, {
      workflowName: 'chain',
      status: 'running',
      rollbackReason: 'failed',
      error: STEP_FAILED_BY_BREAK,
      heartbeatAgoMs: 0,
      steps: [chainLink('link-1'), chainLink('link-2'), { key: 'break', status: 'failed' }],
    });
    await bed.db.client.query(`INSERT INTO dead_letter_queue (task_id, step_id, error) VALUES ($1, $2, '{"message":"x"}')`, [
      taskId,
      stepIds['link-2'],
    ]);
    const app = await startSagaApp(bed);
    const [deadLetter] = await bed.rows.deadLetters(taskId);

    const discard = app.get(SagaService).discardDeadLetter(deadLetter.id);
    await expect(discard).rejects.toBeInstanceOf(DeadLetterTaskActiveError);
    await expect(discard).rejects.toMatchObject({ code: 'DEAD_LETTER_TASK_ACTIVE', taskId, status: 'running' });
    expect(await bed.rows.deadLetters(taskId)).toEqual([deadLetter]);
  });

  it('retries of an orphaned dead letter (its task deleted) fail with DeadLetterOrphanedError; it can be discarded', async () => {
    const app = await startSagaApp(bed);
    const saga = app.get(SagaService);
    const { task, deadLetters } = await partialRollback(bed, app, 1);
    await bed.db.client.query(`DELETE FROM agent_tasks WHERE id = $1`, [task.id]); // step_runs go with it
    const calls = scenario.undoCalls.length;

    await expect(saga.retryDeadLetter(deadLetters[0].id)).rejects.toBeInstanceOf(DeadLetterOrphanedError);
    expect(scenario.undoCalls).toHaveLength(calls);
    const count = () => bed.rows.count('dead_letter_queue');
    expect(await count()).toBe(1);
    expect((await saga.listDeadLetters()).items.map((item) => item.id)).toEqual([deadLetters[0].id]);
    expect(await saga.discardDeadLetter(deadLetters[0].id)).toBeNull();
    expect(await count()).toBe(0);
  });

  it('the seed’s "Find failed compensations" query returns the dead letters of partial rollbacks with their workflow name', async () => {
    const app = await startSagaApp(bed);
    scenario.failStep('charge-card', new VendorError('CardDeclinedError', 'card declined'));
    scenario.undo('book-hotel', { fails: 'always' });
    const trip = await runToEnd(app, 'trip', TRIP);
    const chain = await partialRollback(bed, app, 2);
    expect(trip.status).toBe(TaskStatus.PARTIAL_ROLLBACK);

    const { rows } = await bed.db.client.query(FIND_FAILED_COMPENSATIONS);

    const hotel = await bed.rows.step(trip.id, 'book-hotel');
    expect(rows.map((row) => [row.task_id, row.workflow_name, row.step_id])).toEqual([
      [chain.task.id, 'chain', chain.deadLetters[0].step_id],
      [chain.task.id, 'chain', chain.deadLetters[1].step_id],
      [trip.id, 'trip', hotel.id],
    ]);
    expect(Object.keys(rows[0]).sort()).toEqual(['created_at', 'error', 'id', 'retry_count', 'step_id', 'task_id', 'workflow_name']);
    expect(rows[2].error).toMatchObject({ stepKey: 'book-hotel', message: 'could not undo book-hotel', attempt: 3 });
    expect(rows.map((row) => row.id)).toEqual((await app.get(SagaService).listDeadLetters()).items.map((entry) => entry.id));
  });
});
