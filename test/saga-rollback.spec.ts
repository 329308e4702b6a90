import { CompensationTimeoutError, TaskStatus, WorkerService } from '@duraflow/nestjs';
import { WorkflowRegistry } from '@duraflow/nestjs/discovery/workflow.registry';
import { scenario, VendorError } from './fixtures/saga/scenario';
import { FAST_BACKOFF, functionalUndoName, KEEPSAKES, TRIP } from './fixtures/saga/workflows';
import { FIND_COMPENSABLE_STEPS, FIND_FAILED_COMPENSATIONS, forTask, SEED_TEXT } from './fixtures/schema/seed-queries';
import { startSagaApp, useSagaBed } from './fixtures/saga/saga-bed';
import { runToEnd } from './support/run-to-end';
import { SUBMIT_ONLY } from './support/test-bed';

/*
 * The saga's rollback against PostgreSQL: when a step fails for good, the
 * completed steps are undone newest first (the seed's "Saga Rollback" order), each compensation
 * gets its step's saved output, compensations are timed out and retried, and one that fails for
 * good is dead-lettered while the others still run. Step bodies and compensations are the user's
 * side effects, recorded by `scenario` (test/fixtures/saga); everything the engine does goes
 * through the real database.
 */

describe('saga: rollback', () => {
  const bed = useSagaBed();

  it('quotes the seed’s "Saga Rollback" and "Find failed compensations" queries byte for byte', () => {
    expect(SEED_TEXT).toContain(FIND_COMPENSABLE_STEPS);
    expect(SEED_TEXT).toContain(FIND_FAILED_COMPENSATIONS);
  });

  describe('when a step fails for good', () => {
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
      expect(registry.resolveCompensation('trip', 'book-hotel', 'trip.cancelHotel')!.options).toMatchObject({
        retries: 2,
        timeout: 30_000,
      });
      expect(registry.resolveCompensation('stay', 'notify-guest', 'stay.retractNotice')!.options).toMatchObject({
        retries: 1,
        timeout: 30_000,
      });
    });
  });
});
