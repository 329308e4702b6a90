import { randomUUID } from 'node:crypto';
import {
  SagaService,
  TaskAlreadyFinishedError,
  TaskNotFoundError,
  TaskStatus,
  UnknownWorkflowError,
  WorkerService,
  WorkflowService,
} from '@duraflow/nestjs';
import { chainLink, writeCrashedRun } from './fixtures/saga/crashed-run';
import { scenario, VendorError } from './fixtures/saga/scenario';
import { TRIP } from './fixtures/saga/workflows';
import { startSagaApp, useSagaBed } from './fixtures/saga/saga-bed';
import { runToEnd } from './support/run-to-end';
import { SUBMIT_ONLY } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * cancel(id, { compensate: true }) against PostgreSQL: the completed steps
 * are undone newest first, the running step is aborted, and the task ends cancelled; a task that
 * cannot be cancelled gets a typed error and nothing is written.
 */

describe('saga: cancel with compensate', () => {
  const bed = useSagaBed();

  it('refuses, writing nothing, in a process that does not register the workflow (its compensations run there)', async () => {
    const app = await startSagaApp(bed, { duraflow: { worker: { enabled: false } } });
    const { rows } = await bed.db.client.query<{ id: string }>(
      `INSERT INTO agent_tasks (workflow_name, status) VALUES ('registered-elsewhere', 'pending') RETURNING id`,
    );
    const before = await bed.rows.task(rows[0].id);

    const attempt = app.get(WorkflowService).cancel(rows[0].id, { compensate: true });

    await expect(attempt).rejects.toBeInstanceOf(UnknownWorkflowError);
    await expect(attempt).rejects.toMatchObject({ code: 'UNKNOWN_WORKFLOW', workflowName: 'registered-elsewhere' });
    expect(await bed.rows.task(rows[0].id)).toEqual(before);
  });

  it('cancels a task with 300 unfinished children in one move, their ids told in NOTIFY payloads PostgreSQL takes (8,000 bytes at most)', async () => {
    const app = await startSagaApp(bed, { duraflow: { worker: { enabled: false } } });
    const { rows } = await bed.db.client.query<{ id: string }>(
      `INSERT INTO agent_tasks (workflow_name, status) VALUES ('registered-elsewhere', 'pending') RETURNING id`,
    );
    const parent = rows[0].id;
    await bed.db.client.query(
      `INSERT INTO agent_tasks (workflow_name, status, parent_task_id) SELECT 'registered-elsewhere', 'pending', $1 FROM generate_series(1, 300)`,
      [parent],
    );

    await expect(app.get(WorkflowService).cancel(parent)).resolves.toMatchObject({ id: parent, status: TaskStatus.CANCELLED });

    expect(await bed.rows.count('agent_tasks', `parent_task_id = '${parent}' AND status = 'cancelled'`)).toBe(300);
  });

  it('undoes the completed steps of a task blocked in its third step, newest first, aborts that step and ends cancelled', async () => {
    const gate = scenario.blockStep('rent-car');
    const app = await startSagaApp(bed);
    const workflows = app.get(WorkflowService);
    const worker = app.get(WorkerService);
    const task = await workflows.submit('trip', TRIP);
    await gate.reached.promise;

    const cancelled = await workflows.cancel(task.id, { compensate: true });

    expect(cancelled.status).toBe(TaskStatus.CANCELLED);
    // cancel resolves once the rollback is over.
    expect(scenario.undone(task.id)).toEqual(['book-hotel', 'book-flight']);
    const steps = await bed.rows.steps(task.id);
    for (const call of scenario.undoCallsOf(task.id)) {
      expect(call.output).toStrictEqual(steps.find((step) => step.step_key === call.stepKey).output);
    }
    expect(await bed.rows.compensatedStepKeys(task.id)).toEqual(['book-hotel', 'book-flight']);
    await eventually("rent-car's signal aborted", () => gate.aborts.length === 1);
    await eventually('the worker let go of the run', () => worker.stats().running === 0);

    expect(steps.map((step) => step.step_key)).toEqual(['book-flight', 'book-hotel']);
    expect(scenario.stepsRun(task.id).map(([key]) => key)).toEqual(['book-flight', 'book-hotel']);
    expect(await bed.rows.task(task.id)).toMatchObject({ status: 'cancelled', error: null, output: null, rollback_reason: 'cancelled' });
    expect(worker.stats()).toMatchObject({ stopped: 1, completed: 0, rolledBack: 0, failed: 0 });
  });

  it('dead-letters a compensation that fails during the cancel; the task still ends cancelled, and stays so after a retry', async () => {
    const gate = scenario.blockStep('rent-car');
    scenario.undo('book-flight', { fails: 'always', error: () => new VendorError('AirlineError', 'the airline refuses refunds today') });
    const app = await startSagaApp(bed);
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('trip', TRIP);
    await gate.reached.promise;

    const cancelled = await workflows.cancel(task.id, { compensate: true });

    expect(cancelled.status).toBe(TaskStatus.CANCELLED);
    expect(scenario.undone(task.id)).toEqual(['book-hotel']);
    const deadLetters = await bed.rows.deadLetters(task.id);
    expect(deadLetters.map((row) => [row.step_key, row.error.name, row.error.attempt])).toEqual([['book-flight', 'AirlineError', 3]]);

    scenario.undo('book-flight', undefined);
    const retried = await app.get(SagaService).retryDeadLetter(deadLetters[0].id);
    expect(retried.outcome).toBe('compensated');
    expect(retried.task?.status).toBe(TaskStatus.CANCELLED);
    expect(await bed.rows.deadLetters(task.id)).toEqual([]);
  });

  it('plainly cancels a pending task that has no completed step', async () => {
    const app = await startSagaApp(bed, { duraflow: SUBMIT_ONLY });
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('trip', TRIP);

    const cancelled = await workflows.cancel(task.id, { compensate: true });

    expect(cancelled.status).toBe(TaskStatus.CANCELLED);
    expect(await bed.rows.task(task.id)).toMatchObject({ status: 'cancelled', rollback_reason: null, claim_token: null });
    expect(scenario.undoCalls).toEqual([]);
    expect(await bed.rows.steps(task.id)).toEqual([]);
  });

  it('undoes, in the caller, the steps a pending task completed before its worker went away', async () => {
    const { taskId } = await writeCrashedRun(bed.db.client, {
      workflowName: 'chain',
      status: 'pending',
      input: { links: 2 },
      retryCount: 1,
      steps: [chainLink('link-1'), chainLink('link-2')],
    });
    const app = await startSagaApp(bed, { duraflow: SUBMIT_ONLY });

    const cancelled = await app.get(WorkflowService).cancel(taskId, { compensate: true });

    expect(cancelled.status).toBe(TaskStatus.CANCELLED);
    expect(scenario.undone(taskId)).toEqual(['link-2', 'link-1']);
    expect(scenario.bodyRuns).toEqual([]);
    expect(await bed.rows.compensatedStepKeys(taskId)).toEqual(['link-2', 'link-1']);
  });

  it('refuses a finished task with TaskAlreadyFinishedError and runs no compensation; an unknown id gets TaskNotFoundError', async () => {
    const app = await startSagaApp(bed);
    const done = await runToEnd(app, 'chain', { links: 2 });
    expect(done.status).toBe(TaskStatus.ROLLED_BACK);
    const before = await bed.rows.task(done.id);
    const calls = scenario.undoCalls.length;

    const cancel = app.get(WorkflowService).cancel(done.id, { compensate: true });

    await expect(cancel).rejects.toBeInstanceOf(TaskAlreadyFinishedError);
    await expect(cancel).rejects.toMatchObject({ code: 'TASK_ALREADY_FINISHED', status: 'rolled_back' });
    expect(await bed.rows.task(done.id)).toEqual(before);
    expect(scenario.undoCalls).toHaveLength(calls);
    await expect(app.get(WorkflowService).cancel(randomUUID(), { compensate: true })).rejects.toBeInstanceOf(TaskNotFoundError);
  });
});
