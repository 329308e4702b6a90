import { Injectable, Module, Scope } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import {
  Compensate,
  DuplicateCompensationError,
  DuplicateStepDefinitionError,
  DuplicateWorkflowError,
  DuraflowError,
  DuraflowModule,
  FunctionalWorkflowDefinition,
  InvalidDuraflowOptionsError,
  InvalidWorkflowDefinitionError,
  Step,
  TaskStatus,
  UnknownCompensationTargetError,
  Workflow,
  WorkflowContext,
  WorkflowService,
  workflow,
} from '@duraflow/nestjs';
import { WorkflowRegistry } from '@duraflow/nestjs/discovery/workflow.registry';
import { BookingWorkflow } from './fixtures/definitions/booking.workflow';
import { FlightsApi } from './fixtures/definitions/flights-api';
import { contextProbeWorkflow, paymentWorkflow, refunds } from './fixtures/definitions/payment.workflow';
import { TEST_DURAFLOW_OPTIONS, useTestBed } from './support/test-bed';

const WAIT = { timeoutMs: 10_000 };
const bookingInput = { passenger: 'Ada Lovelace', seats: 2, route: { from: 'LHR', to: 'JFK' } };

/** What these tests check of a step_runs row. */
function stepSummary({ step_key, status, compensation_fn, attempt }: Record<string, any>) {
  return { step_key, status, compensation_fn, attempt };
}

describe('workflow definitions', () => {
  describe('a @Workflow class and a functional workflow in DuraflowModule.forRoot', () => {
    const bed = useTestBed();
    let app: TestingModule;
    let workflows: WorkflowService;
    let flights: FlightsApi;

    beforeAll(async () => {
      app = await bed.start({
        providers: [FlightsApi, BookingWorkflow],
        duraflow: { workflows: [paymentWorkflow, contextProbeWorkflow] },
      });
      workflows = app.get(WorkflowService);
      flights = app.get(FlightsApi);
    });

    beforeEach(() => {
      flights.booked.length = 0;
      flights.cancelled.length = 0;
      flights.failures = 0;
      refunds.length = 0;
    });

    it('runs a decorated workflow whose constructor injects a Nest provider', async () => {
      const task = await workflows.submit('booking', bookingInput);
      const done = await workflows.waitFor(task.id, WAIT);

      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(done.output).toEqual({ flightId: 'FL-1', seats: 2, passenger: 'Ada Lovelace' });
      expect(flights.booked).toEqual([{ from: 'LHR', to: 'JFK' }]);
    });

    it('records a compensation name for the @Compensate-d step and null for the others', async () => {
      const task = await workflows.submit('booking', bookingInput);
      await workflows.waitFor(task.id, WAIT);

      expect((await bed.rows.steps(task.id)).map(stepSummary)).toEqual([
        { step_key: 'book-flight', status: 'completed', compensation_fn: 'booking.cancelFlight', attempt: 1 },
        { step_key: 'reserve-seats', status: 'completed', compensation_fn: null, attempt: 1 },
      ]);
    });

    it('resolves the stored compensation name to the @Compensate method of the injected instance', async () => {
      const task = await workflows.submit('booking', bookingInput);
      await workflows.waitFor(task.id, WAIT);
      const [bookFlight] = await workflows.getSteps(task.id);

      const compensation = app.get(WorkflowRegistry).resolveCompensation('booking', 'book-flight', bookFlight.compensationFn!);
      expect(compensation?.fn).toBeInstanceOf(Function);
      await compensation!.fn(bookFlight.output, {
        runId: task.id,
        workflowName: 'booking',
        stepKey: 'book-flight',
        signal: new AbortController().signal,
        attempt: 1,
      });
      expect(flights.cancelled).toEqual([(bookFlight.output as { id: string }).id]);
    });

    it('applies the @Step options to the decorated method (retries)', async () => {
      flights.failures = 1;
      const task = await workflows.submit('booking', bookingInput);
      const done = await workflows.waitFor(task.id, WAIT);

      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(flights.booked).toHaveLength(2);
      const [bookFlight] = (await bed.rows.steps(task.id)).map(stepSummary);
      expect(bookFlight).toMatchObject({ step_key: 'book-flight', status: 'completed', attempt: 2 });
    });

    it('applies the @Workflow options: maxRetries becomes the task default', async () => {
      const task = await workflows.submit('booking', bookingInput);
      expect(task.maxRetries).toBe(5);
      await workflows.waitFor(task.id, WAIT);
    });

    it('runs a functional workflow registered through forRoot({ workflows })', async () => {
      const task = await workflows.submit('payment', { amount: 42 });
      const done = await workflows.waitFor(task.id, WAIT);

      expect(task.maxRetries).toBe(2);
      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(done.output).toEqual({ chargeId: 'ch-42', receipt: 'receipt for ch-42' });
      expect((await bed.rows.steps(task.id)).map(stepSummary)).toEqual([
        { step_key: 'charge-card', status: 'completed', compensation_fn: 'payment.compensations.charge-card', attempt: 1 },
        { step_key: 'send-receipt', status: 'completed', compensation_fn: null, attempt: 1 },
      ]);
    });

    it('resolves the stored name of a functional compensation to the function given in compensations', async () => {
      const task = await workflows.submit('payment', { amount: 7 });
      await workflows.waitFor(task.id, WAIT);
      const [charge] = await workflows.getSteps(task.id);

      const compensation = app.get(WorkflowRegistry).resolveCompensation('payment', charge.stepKey, charge.compensationFn!);
      await compensation!.fn(charge.output, {
        runId: task.id,
        workflowName: 'payment',
        stepKey: 'charge-card',
        signal: new AbortController().signal,
        attempt: 1,
      });
      expect(refunds).toEqual([{ chargeId: 'ch-7', amount: 7 }]);
    });

    it('gives the workflow a context with runId, workflowName, input, attempt 1 and an AbortSignal', async () => {
      const task = await workflows.submit('context-probe', { note: 'hello' });
      const done = await workflows.waitFor(task.id, WAIT);

      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(done.output).toEqual({
        runId: task.id,
        workflowName: 'context-probe',
        input: { note: 'hello' },
        attempt: 1,
        signalIsAbortSignal: true,
        signalAborted: false,
        stepRunnerIsAvailable: true,
      });
    });

    it('calls a @Step method outside a workflow run as a plain method, recording nothing', async () => {
      const tasksBefore = await bed.rows.count('agent_tasks');
      const stepsBefore = await bed.rows.count('step_runs');
      const booking = app.get(BookingWorkflow);

      const first = booking.bookFlight({ from: 'CDG', to: 'NRT' });
      const second = booking.bookFlight({ from: 'CDG', to: 'NRT' });

      expect(first).not.toBeInstanceOf(Promise);
      expect(first).toEqual({ id: 'FL-1', from: 'CDG', to: 'NRT' });
      expect(second).toEqual({ id: 'FL-2', from: 'CDG', to: 'NRT' });
      expect(flights.booked).toHaveLength(2);
      expect(await bed.rows.count('agent_tasks')).toBe(tasksBefore);
      expect(await bed.rows.count('step_runs')).toBe(stepsBefore);
    });

    it('lets a plain @Step method throw to its caller outside a run', () => {
      flights.failures = 1;
      expect(() => app.get(BookingWorkflow).bookFlight({ from: 'CDG', to: 'NRT' })).toThrow('flights vendor unavailable');
    });
  });

  describe('DuraflowModule.forRootAsync', () => {
    @Injectable()
    class DuraflowSettings {
      readonly workerId = 'settings-worker-7';
      readonly maxRetries = 9;
    }

    @Module({ providers: [DuraflowSettings], exports: [DuraflowSettings] })
    class SettingsModule {}

    @Module({ providers: [FlightsApi, BookingWorkflow] })
    class BookingModule {}

    const bed = useTestBed();
    let app: TestingModule;
    let factoryArgument: unknown;

    beforeAll(async () => {
      app = await bed.start({
        duraflowModule: DuraflowModule.forRootAsync({
          imports: [SettingsModule],
          inject: [DuraflowSettings],
          useFactory: async (settings: DuraflowSettings) => {
            factoryArgument = settings;
            return {
              ...TEST_DURAFLOW_OPTIONS,
              workerId: settings.workerId,
              maxRetries: settings.maxRetries,
              workflows: [paymentWorkflow],
            };
          },
        }),
        imports: [BookingModule],
      });
    });

    it('builds the options with the injected provider', () => {
      expect(factoryArgument).toBeInstanceOf(DuraflowSettings);
    });

    it('runs the functional workflows returned by the factory, with the options it returned', async () => {
      const workflows = app.get(WorkflowService);
      const task = await workflows.submit('payment', { amount: 3 });
      const done = await workflows.waitFor(task.id, WAIT);

      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(done.output).toEqual({ chargeId: 'ch-3', receipt: 'receipt for ch-3' });
      expect(done.workerId).toBe('settings-worker-7');
    });

    it('discovers @Workflow classes as forRoot does, falling back to the module maxRetries', async () => {
      @Workflow('plain-async')
      class PlainWorkflow {
        async run(ctx: WorkflowContext<{ n: number }>) {
          return { doubled: await ctx.step.run('double', () => ctx.input.n * 2) };
        }
      }
      const other = await bed.start({
        duraflowModule: DuraflowModule.forRootAsync({
          imports: [SettingsModule],
          inject: [DuraflowSettings],
          useFactory: (settings: DuraflowSettings) => ({ ...TEST_DURAFLOW_OPTIONS, maxRetries: settings.maxRetries }),
        }),
        providers: [PlainWorkflow],
      });
      const workflows = other.get(WorkflowService);
      const task = await workflows.submit('plain-async', { n: 21 });
      expect(task.maxRetries).toBe(9);
      const done = await workflows.waitFor(task.id, WAIT);
      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(done.output).toEqual({ doubled: 42 });
    });

    it('serves @Workflow classes declared in a feature module', async () => {
      const workflows = app.get(WorkflowService);
      const task = await workflows.submit('booking', bookingInput);
      const done = await workflows.waitFor(task.id, WAIT);

      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(done.output).toEqual({ flightId: 'FL-1', seats: 2, passenger: 'Ada Lovelace' });
      expect(app.get(FlightsApi).booked).toEqual([{ from: 'LHR', to: 'JFK' }]);
    });
  });

  describe('DuraflowModule.forRoot() with every default', () => {
    const bed = useTestBed();

    it('boots with no options and runs a decorated workflow', async () => {
      @Workflow('defaults-only')
      class DefaultsWorkflow {
        async run(ctx: WorkflowContext<{ n: number }>) {
          return { n: await ctx.step.run('echo', () => ctx.input.n) };
        }
      }
      const app = await bed.start({ duraflowModule: DuraflowModule.forRoot(), providers: [DefaultsWorkflow] });
      const workflows = app.get(WorkflowService);
      const task = await workflows.submit('defaults-only', { n: 7 });
      expect(task.maxRetries).toBe(3);
      const done = await workflows.waitFor(task.id, WAIT);
      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(done.output).toEqual({ n: 7 });
    });

    it('uses the TypeORM DataSource named by the dataSource option', async () => {
      @Workflow('named-source')
      class NamedSourceWorkflow {
        async run() {
          return { ok: true };
        }
      }
      const moduleRef = await bed.start({ typeorm: { name: 'jobs' }, duraflow: { dataSource: 'jobs' }, providers: [NamedSourceWorkflow] });
      const workflows = moduleRef.get(WorkflowService);
      const done = await workflows.waitFor((await workflows.submit('named-source', {})).id, WAIT);
      expect(done.output).toEqual({ ok: true });
    });

    it('refuses to boot when the dataSource option names no DataSource', async () => {
      const error = await bed.bootFailure({
        duraflowModule: DuraflowModule.forRoot({ ...TEST_DURAFLOW_OPTIONS, dataSource: 'missing' }),
      });
      expect(error).toBeInstanceOf(InvalidDuraflowOptionsError);
      expect((error as Error).message).toContain('"missing"');
    });
  });

  describe('definitions the application refuses to boot with', () => {
    const bed = useTestBed();

    const forRoot = (workflows: FunctionalWorkflowDefinition[] = []) =>
      DuraflowModule.forRoot({ ...TEST_DURAFLOW_OPTIONS, worker: { enabled: false }, workflows });

    function expectTyped<T extends DuraflowError>(error: unknown, type: abstract new (...args: any[]) => T, code: string): T {
      expect(error).toBeInstanceOf(type);
      expect(error).toBeInstanceOf(DuraflowError);
      expect((error as T).code).toBe(code);
      return error as T;
    }

    it('rejects two @Workflow classes with one name, naming both', async () => {
      @Workflow('twin')
      class FirstTwin {
        run() {}
      }
      @Workflow('twin')
      class SecondTwin {
        run() {}
      }

      const error = await bed.bootFailure({ duraflowModule: forRoot(), providers: [FirstTwin, SecondTwin] });

      const typed = expectTyped(error, DuplicateWorkflowError, 'DUPLICATE_WORKFLOW');
      expect(typed.workflowName).toBe('twin');
      expect(typed.message).toContain('"twin"');
      expect(typed.message).toContain('FirstTwin');
      expect(typed.message).toContain('SecondTwin');
    });

    it('rejects a @Workflow class and a functional workflow with one name, naming both', async () => {
      @Workflow('payment')
      class PaymentClass {
        run() {}
      }

      const error = await bed.bootFailure({ duraflowModule: forRoot([paymentWorkflow]), providers: [PaymentClass] });

      const typed = expectTyped(error, DuplicateWorkflowError, 'DUPLICATE_WORKFLOW');
      expect(typed.message).toContain('"payment"');
      expect(typed.message).toContain('PaymentClass');
      expect(typed.message).toContain('workflow("payment")');
    });

    it('rejects two functional workflows with one name', async () => {
      const error = await bed.bootFailure({
        duraflowModule: forRoot([workflow('refund', () => 1), workflow('refund', () => 2)]),
      });

      const typed = expectTyped(error, DuplicateWorkflowError, 'DUPLICATE_WORKFLOW');
      expect(typed.message).toContain('"refund"');
    });

    it('rejects two @Step methods with one key on one class, naming both methods', async () => {
      @Workflow('double-step')
      class DoubleStep {
        run() {}

        @Step('charge')
        chargeCard() {}

        @Step('charge')
        chargeWallet() {}
      }

      const error = await bed.bootFailure({ duraflowModule: forRoot(), providers: [DoubleStep] });

      const typed = expectTyped(error, DuplicateStepDefinitionError, 'DUPLICATE_STEP_DEFINITION');
      expect(typed.workflowName).toBe('double-step');
      expect(typed.stepKey).toBe('charge');
      expect(typed.message).toContain('DoubleStep.chargeCard');
      expect(typed.message).toContain('DoubleStep.chargeWallet');
    });

    it('rejects a @Compensate for a step the class does not declare, naming the method and the step', async () => {
      @Workflow('orphan-undo')
      class OrphanUndo {
        run() {}

        @Step('reserve')
        reserve() {}

        @Compensate('reserv')
        release() {}
      }

      const error = await bed.bootFailure({ duraflowModule: forRoot(), providers: [OrphanUndo] });

      const typed = expectTyped(error, UnknownCompensationTargetError, 'UNKNOWN_COMPENSATION_TARGET');
      expect(typed.stepKey).toBe('reserv');
      expect(typed.message).toContain('OrphanUndo.release');
      expect(typed.message).toContain('"reserv"');
      expect(typed.message).toContain('"reserve"');
    });

    it('rejects two @Compensate methods for one step', async () => {
      @Workflow('double-undo')
      class DoubleUndo {
        run() {}

        @Step('reserve')
        reserve() {}

        @Compensate('reserve')
        release() {}

        @Compensate('reserve')
        releaseAgain() {}
      }

      const error = await bed.bootFailure({ duraflowModule: forRoot(), providers: [DoubleUndo] });

      const typed = expectTyped(error, DuplicateCompensationError, 'DUPLICATE_COMPENSATION');
      expect(typed.message).toContain('"reserve"');
      expect(typed.message).toContain('release');
      expect(typed.message).toContain('releaseAgain');
    });

    it.each([
      ['a space', 'has space'],
      ['a slash', 'a/b'],
      ['non-ASCII letters', 'réservation'],
      ['an empty string', ''],
      ['256 characters', 'w'.repeat(256)],
    ])('rejects a @Workflow class whose name has %s', async (_, name) => {
      @Workflow(name)
      class BadlyNamed {
        run() {}
      }

      const error = await bed.bootFailure({ duraflowModule: forRoot(), providers: [BadlyNamed] });

      const typed = expectTyped(error, InvalidWorkflowDefinitionError, 'INVALID_WORKFLOW_DEFINITION');
      expect(typed.message).toContain('BadlyNamed');
      expect(typed.message).toContain(JSON.stringify(name));
    });

    it('rejects a functional workflow with an invalid name, naming it', async () => {
      const error = await bed.bootFailure({ duraflowModule: forRoot([workflow('pay ment', () => null)]) });

      const typed = expectTyped(error, InvalidWorkflowDefinitionError, 'INVALID_WORKFLOW_DEFINITION');
      expect(typed.message).toContain('workflow("pay ment")');
    });

    it('rejects a @Workflow class without a run() method, naming the class', async () => {
      @Workflow('no-entry')
      class NoEntryPoint {
        @Step('only-step')
        onlyStep() {}
      }

      const error = await bed.bootFailure({ duraflowModule: forRoot(), providers: [NoEntryPoint] });

      const typed = expectTyped(error, InvalidWorkflowDefinitionError, 'INVALID_WORKFLOW_DEFINITION');
      expect(typed.workflowName).toBe('no-entry');
      expect(typed.message).toContain('NoEntryPoint');
      expect(typed.message).toContain('run(ctx)');
    });

    it('rejects a request-scoped @Workflow provider, naming the class', async () => {
      @Injectable({ scope: Scope.REQUEST })
      @Workflow('per-request')
      class PerRequest {
        run() {}
      }

      const error = await bed.bootFailure({ duraflowModule: forRoot(), providers: [PerRequest] });

      const typed = expectTyped(error, InvalidWorkflowDefinitionError, 'INVALID_WORKFLOW_DEFINITION');
      expect(typed.workflowName).toBe('per-request');
      expect(typed.message).toContain('PerRequest');
      expect(typed.message).toContain('singleton');
    });

    it('rejects a @Workflow provider that becomes request-scoped through its dependencies', async () => {
      @Injectable({ scope: Scope.REQUEST })
      class RequestContext {}

      @Workflow('inherits-scope')
      class InheritsScope {
        constructor(readonly context: RequestContext) {}
        run() {}
      }

      const error = await bed.bootFailure({ duraflowModule: forRoot(), providers: [RequestContext, InheritsScope] });

      const typed = expectTyped(error, InvalidWorkflowDefinitionError, 'INVALID_WORKFLOW_DEFINITION');
      expect(typed.message).toContain('InheritsScope');
    });

    it('rejects a transient @Workflow provider, naming the class', async () => {
      @Injectable({ scope: Scope.TRANSIENT })
      @Workflow('per-injection')
      class PerInjection {
        run() {}
      }

      const error = await bed.bootFailure({ duraflowModule: forRoot(), providers: [PerInjection] });

      const typed = expectTyped(error, InvalidWorkflowDefinitionError, 'INVALID_WORKFLOW_DEFINITION');
      expect(typed.message).toContain('PerInjection');
    });

    it('rejects @Step options out of range, naming the method', async () => {
      @Workflow('bad-step-options')
      class BadStepOptions {
        run() {}

        @Step('charge', { retries: -1 })
        chargeCard() {}
      }

      const error = await bed.bootFailure({ duraflowModule: forRoot(), providers: [BadStepOptions] });

      const typed = expectTyped(error, InvalidWorkflowDefinitionError, 'INVALID_WORKFLOW_DEFINITION');
      expect(typed.workflowName).toBe('bad-step-options');
      expect(typed.message).toContain('BadStepOptions.chargeCard');
      expect(typed.message).toContain('retries');
    });

    it('rejects @Workflow options out of range, naming the class', async () => {
      @Workflow('bad-workflow-options', { maxRetries: -2 })
      class BadWorkflowOptions {
        run() {}
      }

      const error = await bed.bootFailure({ duraflowModule: forRoot(), providers: [BadWorkflowOptions] });

      const typed = expectTyped(error, InvalidWorkflowDefinitionError, 'INVALID_WORKFLOW_DEFINITION');
      expect(typed.message).toContain('BadWorkflowOptions');
      expect(typed.message).toContain('maxRetries');
    });

    it('rejects a functional compensation that is not a function, naming the step', async () => {
      const broken = workflow('refund', () => null, { compensations: { 'charge-card': 'refund it' as never } });

      const error = await bed.bootFailure({ duraflowModule: forRoot([broken]) });

      const typed = expectTyped(error, InvalidWorkflowDefinitionError, 'INVALID_WORKFLOW_DEFINITION');
      expect(typed.message).toContain('"charge-card"');
    });

    it('rejects a workflows entry that was not made by workflow(name, fn)', async () => {
      const notADefinition = { name: 'payment', run: () => null } as unknown as FunctionalWorkflowDefinition;

      const error = await bed.bootFailure({ duraflowModule: forRoot([notADefinition]) });

      const typed = expectTyped(error, InvalidDuraflowOptionsError, 'INVALID_OPTIONS');
      expect(typed.option).toBe('workflows');
    });

    it('boots with each broken definition fixed', async () => {
      @Workflow('fixed')
      class Fixed {
        run() {}

        @Step('reserve')
        reserve() {}

        @Step('charge')
        charge() {}

        @Compensate('reserve')
        release() {}
      }

      const app = await bed.start({ duraflowModule: forRoot([workflow('refund', () => 1)]), providers: [Fixed] });
      expect(app.get(WorkflowRegistry).names().sort()).toEqual(['fixed', 'refund']);
    });
  });
});
