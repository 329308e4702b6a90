import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import {
  CompensationNotRegisteredError,
  CompensationTimeoutError,
  DeadLetterBusyError,
  DeadLetterNotFoundError,
  DeadLetterOrphanedError,
  DeadLetterTaskActiveError,
  InvalidCursorError,
  InvalidListOptionsError,
  ReaperService,
  SagaService,
  TaskAlreadyFinishedError,
  TaskNotFoundError,
  TaskStatus,
  UnknownWorkflowError,
  WorkerService,
  WorkflowRegistry,
  WorkflowService,
} from '@duraflow/nestjs';
import { DEAD_WORKER_ID, writeCrashedRun } from './fixtures/saga/crashed-run';
import { scenario, VendorError } from './fixtures/saga/scenario';
import { CHAIN_LINKS, FAST_BACKOFF, functionalUndoName, KEEPSAKES, shipmentWorkflow, TRIP } from './fixtures/saga/workflows';
import { Gate } from './fixtures/steps/controls';
import { FIND_COMPENSABLE_STEPS, FIND_FAILED_COMPENSATIONS, forTask, SEED_TEXT } from './fixtures/schema/seed-queries';
import { partialRollback, startSagaApp, STEP_FAILED_BY_BREAK, useSagaBed } from './fixtures/saga/saga-bed';
import { runToEnd } from './support/tasks';
import { SUBMIT_ONLY } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * The saga against PostgreSQL (DESIGN semantics 3 and 4): LIFO rollback with each step's
 * saved output, compensation timeouts and retries, the dead-letter queue and its retry,
 * cancel with compensate, rollbacks resumed after a crash, and the reaper sending dead runs
 * through the saga. Step bodies and compensations are the user's side effects, recorded by
 * `scenario` (test/fixtures/saga); everything the engine does goes through the real database.
 */

describe('saga', () => {
  const bed = useSagaBed();

  /** Sessions on the test database blocked on a lock right now. */
  async function sessionsWaitingForLocks(): Promise<number> {
    return (await bed.db.client.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
    )).rows[0].n;
  }

  it('quotes the seed’s "Saga Rollback" and "Find failed compensations" queries byte for byte', () => {
    expect(SEED_TEXT).toContain(FIND_COMPENSABLE_STEPS);
    expect(SEED_TEXT).toContain(FIND_FAILED_COMPENSATIONS);
  });

  describe('rollback when a step fails for good', () => {
    it('undoes the completed steps newest first, each with its saved output, and ends rolled_back keeping the step failure', async () => {
      const app = await startSagaApp(bed);
      scenario.failStep('charge-card', new VendorError('CardDeclinedError', 'card declined: insufficient funds'));
      scenario.beforeUndo = (call) => bed.rows.compensatedStepKeys(call.taskId);

      const done = await runToEnd(app, 'trip', TRIP);

      expect(done.status).toBe(TaskStatus.ROLLED_BACK);
      expect(done.error).toMatchObject({
        code: 'STEP_FAILED',
        stepKey: 'charge-card',
        name: 'CardDeclinedError',
        message: 'card declined: insufficient funds',
      });
      expect(done.completedAt).toBeInstanceOf(Date);
      // Steps 1-3 ran once, step 4 failed, step 5 never started.
      expect(scenario.stepsRun(done.id)).toEqual([
        ['book-flight', 'A'],
        ['book-hotel', 'A'],
        ['rent-car', 'A'],
      ]);
      expect(scenario.attempts(done.id)).toEqual([
        ['rent-car', 1],
        ['book-hotel', 1],
        ['book-flight', 1],
      ]);
      expect(scenario.undone(done.id)).toEqual(['rent-car', 'book-hotel', 'book-flight']);

      // Each compensation received its step's saved output: the JSON round trip of what the step returned.
      const steps = await bed.rows.steps(done.id);
      for (const call of scenario.undoCallsOf(done.id)) {
        const returned = scenario.stepCalls.find((step) => step.taskId === done.id && step.stepKey === call.stepKey)!.returned;
        expect(call.output).toStrictEqual(JSON.parse(JSON.stringify(returned)));
        expect(call.output).toStrictEqual(steps.find((step) => step.step_key === call.stepKey).output);
        expect(call.workflowName).toBe('trip');
      }
      const flight = scenario.undoCallsOf(done.id).find((call) => call.stepKey === 'book-flight')!.output as Record<string, unknown>;
      expect(flight.departsAt).toBe('2030-05-17T09:45:00.000Z');

      // compensated_at is written as each compensation succeeds, not at the end.
      expect(scenario.undoCallsOf(done.id).map((call) => call.observed)).toEqual([[], ['rent-car'], ['rent-car', 'book-hotel']]);
      expect(await bed.rows.compensatedStepKeys(done.id)).toEqual(['rent-car', 'book-hotel', 'book-flight']);

      expect(steps.map((step) => [step.step_key, step.status, step.compensation_fn, step.compensated_at !== null])).toEqual([
        ['book-flight', 'completed', 'trip.cancelFlight', true],
        ['book-hotel', 'completed', 'trip.cancelHotel', true],
        ['rent-car', 'completed', 'trip.returnCar', true],
        ['charge-card', 'failed', null, false],
      ]);
      expect(await bed.rows.deadLetters(done.id)).toEqual([]);
      expect(app.get(WorkerService).stats()).toMatchObject({ rolledBack: 1, failed: 0, partialRollback: 0 });
    });

    it('undoes in the order of the seed’s "Saga Rollback" query (completed_at DESC)', async () => {
      const app = await startSagaApp(bed);
      const done = await runToEnd(app, 'chain', { links: 5 });

      expect(done.status).toBe(TaskStatus.ROLLED_BACK);
      const { rows } = await bed.db.client.query(forTask(FIND_COMPENSABLE_STEPS, done.id));
      expect(rows.map((row) => row.step_key)).toEqual(['link-5', 'link-4', 'link-3', 'link-2', 'link-1']);
      expect(scenario.undone(done.id)).toEqual(rows.map((row) => row.step_key));
      expect(rows.map((row) => row.compensation_fn)).toEqual(rows.map((row) => functionalUndoName('chain', row.step_key)));
    });

    it('passes each compensation the JSON round trip of its step’s output, undefined and null included', async () => {
      const app = await startSagaApp(bed);
      const done = await runToEnd(app, 'keepsakes');

      expect(done.status).toBe(TaskStatus.ROLLED_BACK);
      const received = new Map(scenario.undoCallsOf(done.id).map((call) => [call.stepKey, call.output]));
      expect([...received.keys()]).toEqual(Object.keys(KEEPSAKES).reverse());
      expect(received.get('object')).toStrictEqual({
        id: 'K-1',
        nested: { list: [1, 'two', null, { three: 3 }], empty: {} },
        flag: false,
        when: '2024-01-02T03:04:05.678Z',
      });
      expect(received.get('array')).toStrictEqual([1, 2.5, 'x', true, null, []]);
      expect(received.get('text')).toBe('plain text ✓ "quoted" \\ back');
      expect(received.get('zero')).toBe(0);
      expect(received.get('json-null')).toBeNull();
      expect(received.has('nothing')).toBe(true);
      expect(received.get('nothing')).toBeUndefined();

      // undefined is stored as SQL NULL, null as the JSON null: the two stay apart.
      const steps = await bed.rows.steps(done.id);
      expect(steps.find((step) => step.step_key === 'nothing').output_is_sql_null).toBe(true);
      expect(steps.find((step) => step.step_key === 'json-null').output_is_sql_null).toBe(false);
    });

    it('ends failed, running no compensation, when no completed step has one', async () => {
      const app = await startSagaApp(bed);
      scenario.failStep('reserve-stock', new VendorError('StockError', 'out of stock'));

      const newsletter = await runToEnd(app, 'newsletter');
      const order = await runToEnd(app, 'order');

      // newsletter: two steps completed without a compensation; the failed step's own compensation does not run.
      expect(newsletter.status).toBe(TaskStatus.FAILED);
      expect(newsletter.error).toMatchObject({
        code: 'STEP_FAILED',
        stepKey: 'archive',
        name: 'ArchiveFullError',
        message: 'the archive is full',
      });
      // order: its first (compensated) step failed, so nothing completed.
      expect(order.status).toBe(TaskStatus.FAILED);
      expect(order.error).toMatchObject({ code: 'STEP_FAILED', stepKey: 'reserve-stock', message: 'out of stock' });
      expect(scenario.undoCalls).toEqual([]);
      expect((await bed.rows.steps(newsletter.id)).map((step) => [step.step_key, step.status, step.compensated_at])).toEqual([
        ['render', 'completed', null],
        ['send', 'completed', null],
        ['archive', 'failed', null],
      ]);
      expect(await bed.rows.deadLetters()).toEqual([]);
    });

    it('skips a completed step that has no compensation: it is never undone and never gets compensated_at', async () => {
      const app = await startSagaApp(bed);
      const done = await runToEnd(app, 'order');

      expect(done.status).toBe(TaskStatus.ROLLED_BACK);
      expect(done.error).toMatchObject({ code: 'STEP_FAILED', stepKey: 'ship', name: 'CarrierError' });
      expect(scenario.stepsRun(done.id).map(([key]) => key)).toEqual(['reserve-stock', 'send-email', 'charge-card']);
      expect(scenario.undone(done.id)).toEqual(['charge-card', 'reserve-stock']);
      const email = await bed.rows.step(done.id, 'send-email');
      expect(email).toMatchObject({ status: 'completed', compensation_fn: null, compensated_at: null });
      expect(await bed.rows.compensatedStepKeys(done.id)).toEqual(['charge-card', 'reserve-stock']);
    });

    it('dead-letters a compensation that fails for good with its full error, still runs the rest, and ends partial_rollback', async () => {
      const app = await startSagaApp(bed);
      scenario.failStep('charge-card', new VendorError('CardDeclinedError', 'card declined'));
      scenario.undo('book-hotel', {
        fails: 'always',
        error: (attempt) => new VendorError('HotelApiError', `hotel API returned 503 (attempt ${attempt})`),
      });

      const done = await runToEnd(app, 'trip', TRIP);

      expect(done.status).toBe(TaskStatus.PARTIAL_ROLLBACK);
      expect(done.error).toMatchObject({ code: 'STEP_FAILED', stepKey: 'charge-card', message: 'card declined' });
      // The default retries (2) are used up, then the older step is still undone.
      expect(scenario.attempts(done.id)).toEqual([
        ['rent-car', 1],
        ['book-hotel', 1],
        ['book-hotel', 2],
        ['book-hotel', 3],
        ['book-flight', 1],
      ]);
      expect(scenario.undone(done.id)).toEqual(['rent-car', 'book-flight']);

      const hotel = await bed.rows.step(done.id, 'book-hotel');
      expect(hotel.compensated_at).toBeNull();
      expect(await bed.rows.compensatedStepKeys(done.id)).toEqual(['rent-car', 'book-flight']);
      const deadLetters = await bed.rows.deadLetters(done.id);
      expect(deadLetters).toHaveLength(1);
      expect(deadLetters[0]).toMatchObject({ task_id: done.id, step_id: hotel.id, retry_count: 0 });
      expect(deadLetters[0].error).toMatchObject({
        message: 'hotel API returned 503 (attempt 3)',
        name: 'HotelApiError',
        stack: expect.stringContaining('HotelApiError: hotel API returned 503 (attempt 3)'),
        stepKey: 'book-hotel',
        compensationFn: 'trip.cancelHotel',
        attempt: 3,
      });
      expect(app.get(WorkerService).stats()).toMatchObject({ partialRollback: 1, rolledBack: 0 });
    });
  });

  describe('compensation timeout and retries', () => {
    it('aborts a compensation that runs past its timeout and sends it to the dead-letter queue as COMPENSATION_TIMEOUT', async () => {
      const app = await startSagaApp(bed);
      scenario.undo('hold-deposit', { hangs: true });

      const done = await runToEnd(app, 'stay');

      expect(done.status).toBe(TaskStatus.PARTIAL_ROLLBACK);
      const [hung] = scenario.undoCallsOf(done.id).filter((call) => call.stepKey === 'hold-deposit');
      expect(hung.signal.aborted).toBe(true);
      expect(hung.signal.reason).toBeInstanceOf(CompensationTimeoutError);
      expect(scenario.attempts(done.id)).toEqual([
        ['notify-guest', 1],
        ['hold-deposit', 1],
        ['reserve-room', 1],
      ]);
      expect(scenario.undone(done.id)).toEqual(['notify-guest', 'reserve-room']);
      const [deadLetter] = await bed.rows.deadLetters(done.id);
      expect(deadLetter.step_key).toBe('hold-deposit');
      expect(deadLetter.error).toMatchObject({
        code: 'COMPENSATION_TIMEOUT',
        name: 'CompensationTimeoutError',
        message: expect.stringContaining('timed out after 100 ms'),
        stepKey: 'hold-deposit',
        attempt: 1,
      });
    });

    it('retries a failing compensation up to its retries, passing attempt 1, 2, 3 and the same output each time', async () => {
      const app = await startSagaApp(bed);
      scenario.undo('reserve-room', { fails: 'times', times: 2 });

      const done = await runToEnd(app, 'stay');

      expect(done.status).toBe(TaskStatus.ROLLED_BACK);
      const room = scenario.undoCallsOf(done.id).filter((call) => call.stepKey === 'reserve-room');
      expect(room.map((call) => [call.attempt, call.outcome])).toEqual([
        [1, 'failed'],
        [2, 'failed'],
        [3, 'undone'],
      ]);
      for (const call of room) expect(call.output).toStrictEqual({ roomId: 'R-101', nights: 2 });
      expect((await bed.rows.step(done.id, 'reserve-room')).compensated_at).not.toBeNull();
      expect(await bed.rows.deadLetters()).toEqual([]);
    });

    it('takes timeout and retries from @Compensate over the workflow option over the module option', async () => {
      const app = await startSagaApp(bed, { duraflow: { compensation: { retries: 0, timeout: 5_000, backoff: FAST_BACKOFF } } });
      for (const key of ['reserve-room', 'hold-deposit', 'notify-guest', 'charge']) scenario.undo(key, { fails: 'always' });

      const stay = await runToEnd(app, 'stay');
      const defaults = await runToEnd(app, 'undo-defaults');

      // reserve-room: @Compensate retries 2; hold-deposit: @Compensate retries 0; notify-guest: the workflow's 1.
      expect(scenario.attempts(stay.id)).toEqual([
        ['notify-guest', 1],
        ['notify-guest', 2],
        ['hold-deposit', 1],
        ['reserve-room', 1],
        ['reserve-room', 2],
        ['reserve-room', 3],
      ]);
      expect((await bed.rows.deadLetters(stay.id)).map((row) => [row.step_key, row.error.attempt])).toEqual([
        ['reserve-room', 3],
        ['hold-deposit', 1],
        ['notify-guest', 2],
      ]);
      // undo-defaults has no option of its own: the module's retries 0.
      expect(scenario.attempts(defaults.id)).toEqual([['charge', 1]]);

      const registry = app.get(WorkflowRegistry);
      const options = (workflowName: string, stepKey: string, name: string) => {
        const { retries, timeout } = registry.resolveCompensation(workflowName, stepKey, name)!.options;
        return { retries, timeout };
      };
      expect(options('stay', 'reserve-room', 'stay.releaseRoom')).toEqual({ retries: 2, timeout: 2_000 });
      expect(options('stay', 'hold-deposit', 'stay.refundDeposit')).toEqual({ retries: 0, timeout: 100 });
      expect(options('stay', 'notify-guest', 'stay.retractNotice')).toEqual({ retries: 1, timeout: 5_000 });
      expect(options('undo-defaults', 'charge', 'undo-defaults.compensations.charge')).toEqual({ retries: 0, timeout: 5_000 });
    });

    it('gives a compensation 30 s and 2 retries when nothing says otherwise', async () => {
      const app = await startSagaApp(bed, { duraflow: { ...SUBMIT_ONLY, compensation: undefined } });
      const registry = app.get(WorkflowRegistry);

      expect(registry.resolveCompensation('undo-defaults', 'charge', 'undo-defaults.compensations.charge')!.options).toMatchObject({
        retries: 2,
        timeout: 30_000,
      });
      expect(registry.resolveCompensation('trip', 'book-hotel', 'trip.cancelHotel')!.options).toMatchObject({ retries: 2, timeout: 30_000 });
      expect(registry.resolveCompensation('stay', 'notify-guest', 'stay.retractNotice')!.options).toMatchObject({ retries: 1, timeout: 30_000 });
    });
  });

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
          { key: 'link-1', output: { link: 'link-1' }, compensationFn: functionalUndoName('chain', 'link-1') },
          { key: 'link-2', output: { link: 'link-2' }, compensationFn: 'chain.compensations.unlink-v0' },
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
          ...Object.entries(tampered).map(([key, compensationFn]) => ({ key, output: { link: key }, compensationFn })),
          { key: 'link-4', output: { link: 'link-4' }, compensationFn: functionalUndoName('chain', 'link-4') },
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
        steps: [
          ...CHAIN_LINKS.slice(0, 4).map((key) => ({ key, output: { link: key }, compensationFn: functionalUndoName('chain', key) })),
          { key: 'break', status: 'failed' as const },
        ],
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
          { key: 'link-1', output: { link: 'link-1' }, compensationFn: functionalUndoName('chain', 'link-1'), completedAt: sameInstant, seq: 2 },
          { key: 'link-2', output: { link: 'link-2' }, compensationFn: functionalUndoName('chain', 'link-2'), completedAt: sameInstant, seq: 3 },
          { key: 'link-3', output: { link: 'link-3' }, compensationFn: functionalUndoName('chain', 'link-3'), completedAt: sameInstant, seq: 1 },
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
        steps: [
          { key: 'link-1', output: { link: 'link-1' }, compensationFn: functionalUndoName('chain', 'link-1') },
          { key: 'link-2', output: { link: 'link-2' }, compensationFn: functionalUndoName('chain', 'link-2') },
          { key: 'link-3', output: { link: 'link-3' }, compensationFn: functionalUndoName('chain', 'link-3'), compensated: true },
          { key: 'break', status: 'failed' },
        ],
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
        steps: [
          { key: 'link-1', output: { link: 'link-1' }, compensationFn: functionalUndoName('chain', 'link-1') },
          { key: 'link-2', output: { link: 'link-2' }, compensationFn: functionalUndoName('chain', 'link-2') },
        ],
      });
      const app = await startSagaApp(bed, { duraflow: { ...SUBMIT_ONLY, reaper: { staleAfterMs: 1_000 } } });

      expect(await app.get(ReaperService).reapOnce()).toMatchObject({ requeued: [taskId] });
      await app.get(WorkerService).start();
      const done = await app.get(WorkflowService).waitFor(taskId, { timeoutMs: 15_000 });

      expect(done.status).toBe(TaskStatus.CANCELLED);
      expect(done.error).toBeNull();
      expect(scenario.bodyRuns).toEqual([]);
      expect(scenario.undone(taskId)).toEqual(['link-2', 'link-1']);
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
        steps: [
          { key: 'link-1', output: { link: 'link-1' }, compensationFn: functionalUndoName('chain', 'link-1') },
          { key: 'link-2', output: { link: 'link-2' }, compensationFn: functionalUndoName('chain', 'link-2') },
        ],
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
        steps: [
          { key: 'link-1', output: { link: 'link-1' }, compensationFn: functionalUndoName('chain', 'link-1') },
          { key: 'link-2', output: { link: 'link-2' }, compensationFn: functionalUndoName('chain', 'link-2'), compensated: true },
          { key: 'link-3', output: { link: 'link-3' }, compensationFn: functionalUndoName('chain', 'link-3') },
          { key: 'break', status: 'failed' },
        ],
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

  describe('cancel with compensate', () => {
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
        steps: [
          { key: 'link-1', output: { link: 'link-1' }, compensationFn: functionalUndoName('chain', 'link-1') },
          { key: 'link-2', output: { link: 'link-2' }, compensationFn: functionalUndoName('chain', 'link-2') },
        ],
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

  describe('dead-letter queue', () => {
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

      const retried = scenario.undoCallsOf(task.id).filter((call) => call.outcome === 'undone' && ['nothing', 'json-null'].includes(call.stepKey));
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
      const turnedAway = await Promise.race(retries.map((retry) => retry.then(() => 'resolved', (error: unknown) => error)));
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
        steps: [
          { key: 'link-1', output: { link: 'link-1' }, compensationFn: functionalUndoName('chain', 'link-1') },
          { key: 'link-2', output: { link: 'link-2' }, compensationFn: functionalUndoName('chain', 'link-2') },
          { key: 'break', status: 'failed' },
        ],
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
});
