import { CompensationNotRegisteredError, ReaperService, SagaService, TaskStatus, WorkerService, WorkflowService } from '@duraflow/nestjs';
import { chainLink, DEAD_WORKER_ID, writeCrashedRun } from './fixtures/saga/crashed-run';
import { scenario, VendorError } from './fixtures/saga/scenario';
import { CHAIN_LINKS, functionalUndoName, shipmentWorkflow } from './fixtures/saga/workflows';
import { startSagaApp, STEP_FAILED_BY_BREAK, useSagaBed } from './fixtures/saga/saga-bed';
import { SUBMIT_ONLY } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * A rollback does not depend on the process that started it: compensations are found by the
 * name stored with each step (in another app, after a restart), a rollback left mid-way by a
 * crash resumes with only the compensations not yet recorded, and the reaper sends dead runs
 * through the saga. Crashed runs are written as the engine leaves them (test/fixtures/saga/crashed-run.ts).
 */

describe('saga: a rollback outlives the process that started it', () => {
  const bed = useSagaBed();

  describe('compensation_fn across processes', () => {
    it('undoes steps completed by app A with the compensations of app B, resolved by the stored name', async () => {
      const gate = scenario.blockStep('charge');
      const appA = await startSagaApp(bed, { workflows: [shipmentWorkflow('A')] });
      const submitted = await appA.get(WorkflowService).submit('shipment', {});
      await gate.reached.promise;

      // App A stops while "charge" is blocked: the task goes back to pending with three checkpoints.
      await bed.close(appA);
      expect(gate.aborts).toHaveLength(1);
      expect((await bed.rows.task(submitted.id)).status).toBe(TaskStatus.PENDING);
      const saved = await bed.rows.steps(submitted.id);
      expect(saved.map((step) => [step.step_key, step.compensation_fn])).toEqual([
        ['reserve-stock', 'shipment.compensations.reserve-stock'],
        ['print-label', 'shipment.compensations.print-label'],
        ['book-pickup', 'shipment.compensations.book-pickup'],
      ]);

      // App B: a new module with its own definition of "shipment"; there "charge" fails.
      scenario.releaseStep('charge');
      scenario.failStep('charge', new VendorError('PaymentGatewayError', 'gateway unreachable'));
      const appB = await startSagaApp(bed, { workflows: [shipmentWorkflow('B')] });
      const done = await appB.get(WorkflowService).waitFor(submitted.id, { timeoutMs: 15_000 });

      expect(done.status).toBe(TaskStatus.ROLLED_BACK);
      expect(done.error).toMatchObject({ code: 'STEP_FAILED', stepKey: 'charge', message: 'gateway unreachable' });
      expect(scenario.bodyRuns.map((run) => run.app)).toEqual(['A', 'B']);
      expect(scenario.stepsRun(done.id)).toEqual([
        ['reserve-stock', 'A'],
        ['print-label', 'A'],
        ['book-pickup', 'A'],
      ]);
      const undone = scenario.undoCallsOf(done.id);
      expect(undone.map((call) => [call.stepKey, call.app, call.outcome])).toEqual([
        ['book-pickup', 'B', 'undone'],
        ['print-label', 'B', 'undone'],
        ['reserve-stock', 'B', 'undone'],
      ]);
      for (const call of undone) {
        expect(call.output).toStrictEqual(saved.find((step) => step.step_key === call.stepKey).output);
        expect(call.output).toMatchObject({ by: 'A' });
      }
    });

    it('dead-letters a step whose compensation_fn resolves to nothing (COMPENSATION_NOT_REGISTERED) and undoes the rest', async () => {
      const { taskId, stepIds } = await writeCrashedRun(bed.db.client, {
        workflowName: 'chain',
        status: 'pending',
        rollbackReason: 'failed',
        error: STEP_FAILED_BY_BREAK,
        steps: [
          chainLink('link-1'),
          chainLink('link-2', { compensationFn: 'chain.compensations.unlink-v0' }),
          { key: 'break', status: 'failed' },
        ],
      });
      const app = await startSagaApp(bed);
      const done = await app.get(WorkflowService).waitFor(taskId, { timeoutMs: 15_000 });

      expect(done.status).toBe(TaskStatus.PARTIAL_ROLLBACK);
      expect(scenario.undone(taskId)).toEqual(['link-1']);
      const [deadLetter] = await bed.rows.deadLetters(taskId);
      expect(deadLetter).toMatchObject({ step_id: stepIds['link-2'], retry_count: 0 });
      expect(deadLetter.error).toMatchObject({
        code: 'COMPENSATION_NOT_REGISTERED',
        name: 'CompensationNotRegisteredError',
        stepKey: 'link-2',
        compensationFn: 'chain.compensations.unlink-v0',
        message: expect.stringContaining('"chain.compensations.unlink-v0"'),
      });

      // A retry cannot help until the compensation is deployed again: typed error, nothing written.
      const retry = app.get(SagaService).retryDeadLetter(deadLetter.id);
      await expect(retry).rejects.toBeInstanceOf(CompensationNotRegisteredError);
      await expect(retry).rejects.toMatchObject({ code: 'COMPENSATION_NOT_REGISTERED' });
      expect(await bed.rows.deadLetters(taskId)).toEqual([deadLetter]);
      expect((await bed.rows.task(taskId)).status).toBe(TaskStatus.PARTIAL_ROLLBACK);
    });

    it('resolves a name only to its own workflow’s compensation of that step: a tampered compensation_fn is dead-lettered, and so is its retry', async () => {
      // Each name below resolved before, to an undo that this process registers.
      const tampered = {
        'link-1': functionalUndoName('order', 'charge-card'), // another workflow's refund
        'link-2': functionalUndoName('chain', 'link-3'), // this workflow, another step's undo
        'link-3': 'trip.cancelFlight', // a decorated workflow's undo
      };
      const { taskId, stepIds } = await writeCrashedRun(bed.db.client, {
        workflowName: 'chain',
        status: 'pending',
        rollbackReason: 'failed',
        error: STEP_FAILED_BY_BREAK,
        steps: [
          ...Object.entries(tampered).map(([key, compensationFn]) => chainLink(key, { compensationFn })),
          chainLink('link-4'),
          { key: 'break', status: 'failed' as const },
        ],
      });
      const app = await startSagaApp(bed);
      const done = await app.get(WorkflowService).waitFor(taskId, { timeoutMs: 15_000 });

      expect(done.status).toBe(TaskStatus.PARTIAL_ROLLBACK);
      expect(scenario.undoCalls.map((call) => [call.taskId, call.stepKey])).toEqual([[taskId, 'link-4']]);
      const deadLetters = await bed.rows.deadLetters(taskId);
      expect(deadLetters.map((row) => [row.step_id, row.error.code, row.error.compensationFn]).sort()).toEqual(
        Object.entries(tampered)
          .map(([key, compensationFn]) => [stepIds[key], 'COMPENSATION_NOT_REGISTERED', compensationFn])
          .sort(),
      );
      expect(deadLetters[0].error.message).toMatch(/of workflow "chain" is not registered in this process/);

      for (const row of deadLetters) {
        await expect(app.get(SagaService).retryDeadLetter(row.id)).rejects.toMatchObject({
          name: 'CompensationNotRegisteredError',
          code: 'COMPENSATION_NOT_REGISTERED',
          compensationFn: row.error.compensationFn,
        });
      }
      expect(scenario.undoCalls).toHaveLength(1);
      expect(await bed.rows.deadLetters(taskId)).toEqual(deadLetters);
      expect(await bed.rows.compensatedStepKeys(taskId)).toEqual(['link-4']);
    });
  });

  describe('resuming an interrupted rollback', () => {
    it('runs only the compensations not yet recorded, never the workflow body, when a worker claims a task left mid-rollback', async () => {
      const { taskId, stepIds } = await writeCrashedRun(bed.db.client, {
        workflowName: 'chain',
        status: 'pending',
        rollbackReason: 'failed',
        error: STEP_FAILED_BY_BREAK,
        steps: [...CHAIN_LINKS.slice(0, 4).map((key) => chainLink(key)), { key: 'break', status: 'failed' as const }],
      });
      // The crashed rollback had undone link-4 (the newest) and recorded it.
      await bed.db.client.query(`UPDATE step_runs SET compensated_at = now() - interval '5 minutes' WHERE id = $1`, [stepIds['link-4']]);
      const link4CompensatedAt = (await bed.rows.step(taskId, 'link-4')).compensated_at;

      const app = await startSagaApp(bed);
      const done = await app.get(WorkflowService).waitFor(taskId, { timeoutMs: 15_000 });

      expect(done.status).toBe(TaskStatus.ROLLED_BACK);
      expect(done.error).toEqual(STEP_FAILED_BY_BREAK);
      expect(scenario.bodyRuns).toEqual([]);
      expect(scenario.stepCalls).toEqual([]);
      expect(scenario.attempts(taskId)).toEqual([
        ['link-3', 1],
        ['link-2', 1],
        ['link-1', 1],
      ]);
      for (const call of scenario.undoCallsOf(taskId)) expect(call.output).toStrictEqual({ link: call.stepKey });
      expect((await bed.rows.step(taskId, 'link-4')).compensated_at).toEqual(link4CompensatedAt);
      expect(await bed.rows.compensatedStepKeys(taskId)).toEqual(['link-4', 'link-3', 'link-2', 'link-1']);
      expect((await bed.rows.task(taskId)).retry_count).toBe(0);
    });

    it('breaks a tie in completed_at by the order the run completed the steps (completion_seq DESC)', async () => {
      const sameInstant = new Date(Date.now() - 60_000);
      const { taskId } = await writeCrashedRun(bed.db.client, {
        workflowName: 'chain',
        status: 'pending',
        rollbackReason: 'failed',
        error: STEP_FAILED_BY_BREAK,
        steps: [
          chainLink('link-1', { completedAt: sameInstant, seq: 2 }),
          chainLink('link-2', { completedAt: sameInstant, seq: 3 }),
          chainLink('link-3', { completedAt: sameInstant, seq: 1 }),
        ],
      });

      const app = await startSagaApp(bed);
      const done = await app.get(WorkflowService).waitFor(taskId, { timeoutMs: 15_000 });

      expect(done.status).toBe(TaskStatus.ROLLED_BACK);
      expect(scenario.undone(taskId)).toEqual(['link-2', 'link-1', 'link-3']);
    });

    it('resumes a rollback whose worker died once the reaper hands the stale task back', async () => {
      const { taskId } = await writeCrashedRun(bed.db.client, {
        workflowName: 'chain',
        status: 'running',
        rollbackReason: 'failed',
        error: STEP_FAILED_BY_BREAK,
        retryCount: 0,
        maxRetries: 3,
        steps: [chainLink('link-1'), chainLink('link-2'), chainLink('link-3', { compensated: true }), { key: 'break', status: 'failed' }],
      });
      expect(await bed.rows.task(taskId)).toMatchObject({ status: 'running', worker_id: DEAD_WORKER_ID });
      const app = await startSagaApp(bed, { duraflow: { ...SUBMIT_ONLY, reaper: { staleAfterMs: 1_000 } } });

      const reaped = await app.get(ReaperService).reapOnce();

      expect(reaped).toMatchObject({ requeued: [taskId], rollingBack: [], failed: [], ended: [] });
      expect(await bed.rows.task(taskId)).toMatchObject({
        status: 'pending',
        retry_count: 1,
        rollback_reason: 'failed',
        worker_id: null,
        claim_token: null,
        error: STEP_FAILED_BY_BREAK,
      });

      await app.get(WorkerService).start();
      const done = await app.get(WorkflowService).waitFor(taskId, { timeoutMs: 15_000 });

      expect(done.status).toBe(TaskStatus.ROLLED_BACK);
      expect(done.error).toEqual(STEP_FAILED_BY_BREAK);
      expect(scenario.bodyRuns).toEqual([]);
      expect(scenario.attempts(taskId)).toEqual([
        ['link-2', 1],
        ['link-1', 1],
      ]);
    });

    it('finishes a cancel rollback whose canceller died: the task ends cancelled', async () => {
      const { taskId } = await writeCrashedRun(bed.db.client, {
        workflowName: 'chain',
        status: 'running',
        rollbackReason: 'cancelled',
        steps: [chainLink('link-1'), chainLink('link-2')],
      });
      const app = await startSagaApp(bed, { duraflow: { ...SUBMIT_ONLY, reaper: { staleAfterMs: 1_000 } } });

      expect(await app.get(ReaperService).reapOnce()).toMatchObject({ requeued: [taskId] });
      await app.get(WorkerService).start();
      const done = await app.get(WorkflowService).waitFor(taskId, { timeoutMs: 15_000 });

      expect(done.status).toBe(TaskStatus.CANCELLED);
      expect(done.error).toBeNull();
      expect(scenario.bodyRuns).toEqual([]);
      expect(scenario.undone(taskId)).toEqual(['link-2', 'link-1']);
      // The worker counts an outcome once its statement committed, which waitFor may see first.
      await eventually('the worker counted the cancel', () => app.get(WorkerService).stats(), { until: (stats) => stats.cancelled === 1 });
      expect(app.get(WorkerService).stats()).toMatchObject({ cancelled: 1, rolledBack: 0 });
    });
  });

  describe('the reaper', () => {
    it('sends a stale task whose retries are used up through the saga: pending with MAX_RETRIES_EXCEEDED, then rolled_back', async () => {
      const { taskId } = await writeCrashedRun(bed.db.client, {
        workflowName: 'chain',
        status: 'running',
        input: { links: 3 },
        retryCount: 2,
        maxRetries: 2,
        steps: [chainLink('link-1'), chainLink('link-2')],
      });
      const app = await startSagaApp(bed, { duraflow: { ...SUBMIT_ONLY, reaper: { staleAfterMs: 1_000 } } });

      const reaped = await app.get(ReaperService).reapOnce();

      expect(reaped).toMatchObject({ requeued: [], rollingBack: [taskId], failed: [], ended: [] });
      const row = await bed.rows.task(taskId);
      expect(row).toMatchObject({ status: 'pending', rollback_reason: 'failed', retry_count: 2, worker_id: null, claim_token: null });
      expect(row.error).toMatchObject({ code: 'MAX_RETRIES_EXCEEDED', name: 'MaxRetriesExceededError' });

      await app.get(WorkerService).start();
      const done = await app.get(WorkflowService).waitFor(taskId, { timeoutMs: 15_000 });

      expect(done.status).toBe(TaskStatus.ROLLED_BACK);
      expect(done.error).toEqual(row.error);
      expect(scenario.bodyRuns).toEqual([]);
      expect(scenario.undone(taskId)).toEqual(['link-2', 'link-1']);
    });

    it('gives up on a stale rollback with its retries used up: the undos not run are dead-lettered, the task ends partial_rollback', async () => {
      const { taskId, stepIds } = await writeCrashedRun(bed.db.client, {
        workflowName: 'chain',
        status: 'running',
        rollbackReason: 'failed',
        error: STEP_FAILED_BY_BREAK,
        retryCount: 3,
        maxRetries: 3,
        steps: [chainLink('link-1'), chainLink('link-2', { compensated: true }), chainLink('link-3'), { key: 'break', status: 'failed' }],
      });
      const app = await startSagaApp(bed, { duraflow: { reaper: { staleAfterMs: 1_000 } } });

      const reaped = await app.get(ReaperService).reapOnce();

      expect(reaped).toMatchObject({
        requeued: [],
        rollingBack: [],
        failed: [],
        ended: [{ id: taskId, status: TaskStatus.PARTIAL_ROLLBACK }],
      });
      expect(await bed.rows.task(taskId)).toMatchObject({ status: 'partial_rollback', error: STEP_FAILED_BY_BREAK });
      const deadLetters = await bed.rows.deadLetters(taskId);
      expect(deadLetters.map((row) => row.step_id).sort()).toEqual([stepIds['link-1'], stepIds['link-3']].sort());
      for (const row of deadLetters) {
        expect(row.error).toMatchObject({
          code: 'MAX_RETRIES_EXCEEDED',
          stepKey: row.step_key,
          compensationFn: functionalUndoName('chain', row.step_key),
        });
      }
      expect(scenario.undoCalls).toEqual([]);

      // A person retries both from the queue: the task is then fully rolled back.
      const saga = app.get(SagaService);
      await saga.retryDeadLetter(deadLetters[0].id);
      const last = await saga.retryDeadLetter(deadLetters[1].id);
      expect(last.task?.status).toBe(TaskStatus.ROLLED_BACK);
      expect(scenario.undone(taskId).sort()).toEqual(['link-1', 'link-3']);
      expect((await bed.rows.step(taskId, 'link-2')).compensated_at).not.toBeNull();
    });

    it('fails a stale task whose retries are used up and that has nothing to undo, with MAX_RETRIES_EXCEEDED', async () => {
      const { taskId } = await writeCrashedRun(bed.db.client, {
        workflowName: 'newsletter',
        status: 'running',
        retryCount: 1,
        maxRetries: 1,
        steps: [{ key: 'render', output: { html: '<h1>News</h1>' } }],
      });
      const app = await startSagaApp(bed, { duraflow: { reaper: { staleAfterMs: 1_000 } } });

      const reaped = await app.get(ReaperService).reapOnce();

      expect(reaped).toMatchObject({ requeued: [], rollingBack: [], failed: [taskId], ended: [{ id: taskId, status: TaskStatus.FAILED }] });
      const row = await bed.rows.task(taskId);
      expect(row.status).toBe('failed');
      expect(row.error).toMatchObject({ code: 'MAX_RETRIES_EXCEEDED' });
      expect(row.rollback_reason).toBeNull();
    });
  });
});
