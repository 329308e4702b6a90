import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Provider } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import {
  currentStepContext,
  DuraflowModuleOptions,
  FunctionalWorkflowDefinition,
  InvalidDuraflowOptionsError,
  ReaperService,
  Step,
  TaskStatus,
  Workflow,
  WorkflowContext,
  WorkerService,
  WorkflowService,
  workflow,
} from '@duraflow/nestjs';
import { Gate } from './fixtures/steps/gate';
import { SideEffects } from './fixtures/steps/side-effects';
import { eventually, sleep } from './support/waiting';
import { runToEnd } from './support/run-to-end';
import { useTestBed } from './support/test-bed';

/*
 * The step runner against PostgreSQL: memoization across processes, duplicate and nested
 * keys, retries with backoff, timeouts, the JSON round trip, workflow-level failures,
 * cancellation and fencing. Step bodies record their side effects in `side_effects`, a
 * table the engine knows nothing about, so "ran once" is counted from outside the engine.
 */

const bed = useTestBed();
let effects: SideEffects;
/** Which app (Nest module) a step body is running in, as the test last set it. */
let appLabel = 'A';

/** An app on the test database with these workflows, its worker quick to hand back on close. */
function startApp(options: {
  workflows?: FunctionalWorkflowDefinition[];
  providers?: Provider[];
  duraflow?: DuraflowModuleOptions;
}): Promise<TestingModule> {
  const duraflow = options.duraflow ?? {};
  return bed.start({
    providers: options.providers,
    duraflow: { ...duraflow, workflows: options.workflows ?? [], worker: { shutdownTimeoutMs: 100, ...duraflow.worker } },
  });
}

// ---------------------------------------------------------------- memoization

let checkoutGate: Gate;

/** Three ctx.step.run steps; the third waits at `checkoutGate`. */
const checkout = workflow('checkout', async (ctx: WorkflowContext) => {
  const order = await ctx.step.run('create-order', async () => {
    const orderId = randomUUID();
    await effects.record(ctx.runId, 'create-order', appLabel, { orderId });
    return { orderId };
  });
  const reservation = await ctx.step.run('reserve-stock', async () => {
    const reservationId = randomUUID();
    await effects.record(ctx.runId, 'reserve-stock', appLabel, { reservationId });
    return { reservationId, forOrder: order.orderId };
  });
  const charge = await ctx.step.run('charge-card', async ({ signal }) => {
    await effects.record(ctx.runId, 'charge-card entered', appLabel);
    await checkoutGate.wait(signal);
    const chargeId = randomUUID();
    await effects.record(ctx.runId, 'charge-card', appLabel, { chargeId });
    return { chargeId };
  });
  return { order, reservation, charge, attempt: ctx.attempt };
});

let tripGate: Gate;

/** The same shape with @Step methods; the third waits at `tripGate`. */
@Workflow('trip')
class TripWorkflow {
  async run(ctx: WorkflowContext) {
    const flight = await this.bookFlight(ctx.runId);
    const hotel = await this.bookHotel(ctx.runId, flight.flightId);
    const car = await this.rentCar(ctx.runId);
    return { flight, hotel, car, attempt: ctx.attempt };
  }

  @Step('book-flight')
  async bookFlight(taskId: string) {
    const flightId = randomUUID();
    await effects.record(taskId, 'book-flight', appLabel, { flightId });
    return { flightId };
  }

  @Step('book-hotel')
  async bookHotel(taskId: string, flightId: string) {
    const hotelId = randomUUID();
    await effects.record(taskId, 'book-hotel', appLabel, { hotelId });
    return { hotelId, nearFlight: flightId };
  }

  @Step('rent-car')
  async rentCar(taskId: string) {
    await effects.record(taskId, 'rent-car entered', appLabel);
    await tripGate.wait(currentStepContext()!.signal);
    const carId = randomUUID();
    await effects.record(taskId, 'rent-car', appLabel, { carId });
    return { carId };
  }
}

// ---------------------------------------------------------------- step keys

const duplicateKey = workflow('duplicate-key', async (ctx: WorkflowContext) => {
  await ctx.step.run('send-email', async () => {
    await effects.record(ctx.runId, 'send-email', appLabel, { which: 'first' });
    return { which: 'first' };
  });
  await ctx.step.run('send-email', async () => {
    await effects.record(ctx.runId, 'send-email', appLabel, { which: 'second' });
    return { which: 'second' };
  });
  return 'unreachable';
});

@Workflow('newsletter')
class NewsletterWorkflow {
  async run(ctx: WorkflowContext) {
    await this.notify(ctx.runId, 'first');
    await this.notify(ctx.runId, 'second');
    return 'unreachable';
  }

  @Step('notify')
  async notify(taskId: string, which: string) {
    await effects.record(taskId, 'notify', appLabel, { which });
    return { which };
  }
}

const nestedSteps = workflow('nested-steps', async (ctx: WorkflowContext) => {
  await ctx.step.run('outer', async () => {
    await ctx.step.run('inner', () => effects.record(ctx.runId, 'inner', appLabel));
    await effects.record(ctx.runId, 'outer', appLabel);
  });
  return 'unreachable';
});

@Workflow('nested-step-method')
class NestedStepMethodWorkflow {
  async run(ctx: WorkflowContext) {
    await ctx.step.run('outer', () => this.inner(ctx.runId));
    return 'unreachable';
  }

  @Step('inner')
  async inner(taskId: string) {
    await effects.record(taskId, 'inner', appLabel);
  }
}

// ---------------------------------------------------------------- retries

const attemptsSeen = new Map<string, number[]>();
const attemptStarts = new Map<string, number[]>();

function noteAttempt(taskId: string, attempt: number): void {
  attemptsSeen.set(taskId, [...(attemptsSeen.get(taskId) ?? []), attempt]);
  attemptStarts.set(taskId, [...(attemptStarts.get(taskId) ?? []), performance.now()]);
}

const flakyApi = workflow('flaky-api', async (ctx: WorkflowContext) =>
  ctx.step.run(
    'call-api',
    async ({ attempt }) => {
      noteAttempt(ctx.runId, attempt);
      await effects.record(ctx.runId, 'call-api', appLabel, { attempt });
      if (attempt < 3) throw new Error(`api unavailable (attempt ${attempt})`);
      return { answeredOnAttempt: attempt };
    },
    { retries: 3, backoff: { initialDelayMs: 10 } },
  ),
);

class PaymentDeclinedError extends Error {
  override name = 'PaymentDeclinedError';
}

const declinedPayment = workflow('declined-payment', async (ctx: WorkflowContext) => {
  await ctx.step.run(
    'charge',
    async ({ attempt }) => {
      noteAttempt(ctx.runId, attempt);
      await effects.record(ctx.runId, 'charge', appLabel, { attempt });
      throw new PaymentDeclinedError(`card declined (attempt ${attempt})`);
    },
    { retries: 2, backoff: { initialDelayMs: 10 } },
  );
  await effects.record(ctx.runId, 'after-charge', appLabel);
  return 'unreachable';
});

const backoffProbe = workflow('backoff-probe', async (ctx: WorkflowContext) =>
  ctx.step.run(
    'poll-status',
    ({ attempt }) => {
      noteAttempt(ctx.runId, attempt);
      if (attempt <= 3) throw new Error('not ready yet');
      return { readyOnAttempt: attempt };
    },
    { retries: 3, backoff: { initialDelayMs: 50, factor: 2 } },
  ),
);

// ---------------------------------------------------------------- timeouts

interface AbortSeen {
  attempt: number;
  aborted: boolean;
  reason: unknown;
}
const abortsSeen = new Map<string, AbortSeen[]>();
let lateResolutions = 0;

function watchSignal(taskId: string, signal: AbortSignal, attempt: number): void {
  signal.addEventListener(
    'abort',
    () => abortsSeen.set(taskId, [...(abortsSeen.get(taskId) ?? []), { attempt, aborted: signal.aborted, reason: signal.reason }]),
    { once: true },
  );
}

/** Rejects with the signal's reason as soon as it aborts: a step that honours its signal. */
const slowHonouring = workflow('slow-honouring', async (ctx: WorkflowContext) =>
  ctx.step.run(
    'fetch-report',
    ({ signal, attempt }) => {
      noteAttempt(ctx.runId, attempt);
      watchSignal(ctx.runId, signal, attempt);
      return new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
    },
    { timeout: 100, retries: 1, backoff: { initialDelayMs: 10 } },
  ),
);

/** Pays no attention to its signal and resolves long after the timeout. */
const slowIgnoring = workflow('slow-ignoring', async (ctx: WorkflowContext) =>
  ctx.step.run(
    'fetch-report',
    ({ signal, attempt }) => {
      noteAttempt(ctx.runId, attempt);
      watchSignal(ctx.runId, signal, attempt);
      return new Promise((resolve) =>
        setTimeout(() => {
          lateResolutions++;
          resolve({ lateAttempt: attempt });
        }, 400),
      );
    },
    { timeout: 100, retries: 1, backoff: { initialDelayMs: 10 } },
  ),
);

/** Hangs on its first attempt, answers at once on the second. */
const slowOnce = workflow('slow-once', async (ctx: WorkflowContext) =>
  ctx.step.run(
    'fetch-report',
    ({ signal, attempt }) => {
      noteAttempt(ctx.runId, attempt);
      if (attempt === 1) return new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
      return { servedOnAttempt: attempt };
    },
    { timeout: 100, retries: 1, backoff: { initialDelayMs: 10 } },
  ),
);

// ---------------------------------------------------------------- JSON round trip

const STAMP = '2024-05-06T07:08:09.010Z';
let jsonGate: Gate;
const jsonSeen: Array<{ app: string; date: unknown; nothing: unknown; empty: unknown }> = [];

const jsonRoundTrip = workflow('json-round-trip', async (ctx: WorkflowContext) => {
  const date = await ctx.step.run('stamp', () => new Date(STAMP));
  const nothing = await ctx.step.run('log-only', () => undefined);
  const empty = await ctx.step.run('lookup-missing', () => null);
  jsonSeen.push({ app: appLabel, date, nothing, empty });
  await ctx.step.run('finish', ({ signal }) => jsonGate.wait(signal));
  return { date, empty, nothingWasUndefined: nothing === undefined };
});

const bigintOutput = workflow('bigint-output', async (ctx: WorkflowContext) => {
  await ctx.step.run('count-rows', () => ({ rows: BigInt(10) }));
  await effects.record(ctx.runId, 'after-count', appLabel);
  return 'unreachable';
});

// ---------------------------------------------------------------- workflow-level outcomes

const throwsOutsideSteps = workflow('throws-outside-steps', async (ctx: WorkflowContext) => {
  const { total } = await ctx.step.run('load-cart', () => ({ total: 5 }));
  if (total < 10) throw new RangeError(`cart total ${total} is below the minimum of 10`);
  return 'unreachable';
});

const recoversFromStep = workflow('recovers-from-step', async (ctx: WorkflowContext) => {
  const quote = await ctx.step
    .run('fetch-quote', () => {
      throw new Error('quote service down');
    })
    .catch(() => ({ price: 100, source: 'fallback' }));
  return { quote, total: quote.price * 2 };
});

const returnsValue = workflow('returns-value', async (ctx: WorkflowContext<{ a: number; b: number }>) => {
  const sum = await ctx.step.run('add', () => ctx.input.a + ctx.input.b);
  return { sum, label: `sum is ${sum}`, items: [sum, null, true] };
});

// ---------------------------------------------------------------- cancellation and fencing

let approvalGate: Gate;

const awaitsApproval = workflow('awaits-approval', async (ctx: WorkflowContext) => {
  await ctx.step.run('reserve', () => effects.record(ctx.runId, 'reserve', appLabel));
  await ctx.step.run('await-approval', async ({ signal }) => {
    await approvalGate.wait(signal);
    await effects.record(ctx.runId, 'await-approval', appLabel);
  });
  await ctx.step.run('ship', () => effects.record(ctx.runId, 'ship', appLabel));
  return 'shipped';
});

let fencedGate: Gate;

/** The middle step ignores its signal, so only the checkpoint's fence can stop its output landing. */
const fenced = workflow('fenced', async (ctx: WorkflowContext) => {
  await ctx.step.run('before', () => effects.record(ctx.runId, 'before', appLabel));
  await ctx.step.run('blocked', async () => {
    await fencedGate.wait();
    await effects.record(ctx.runId, 'blocked', appLabel);
    return { done: true };
  });
  await ctx.step.run('after', () => effects.record(ctx.runId, 'after', appLabel));
  return 'finished';
});

// ---------------------------------------------------------------- the specification

describe('step runner', () => {
  beforeAll(async () => {
    effects = new SideEffects(bed.db.client);
    await effects.createTable();
  });

  beforeEach(() => {
    appLabel = 'A';
  });

  describe('memoization across a fresh module', () => {
    it('does not run completed ctx.step.run steps again when another module resumes the task, and returns their saved outputs', async () => {
      checkoutGate = new Gate();
      const appA = await startApp({ workflows: [checkout] });
      const task = await appA.get(WorkflowService).submit('checkout', {});
      await checkoutGate.reached.promise;

      // App A shuts down while "charge-card" is blocked: its signal aborts and the task is handed back.
      await bed.close(appA);
      expect(checkoutGate.aborts).toHaveLength(1);
      expect((await bed.rows.task(task.id)).status).toBe(TaskStatus.PENDING);
      expect(await bed.rows.completedStepKeys(task.id)).toEqual(['create-order', 'reserve-stock']);

      checkoutGate.open();
      appLabel = 'B';
      const appB = await startApp({ workflows: [checkout] });
      const done = await appB.get(WorkflowService).waitFor(task.id, { timeoutMs: 15_000 });

      expect(done.status).toBe(TaskStatus.COMPLETED);
      const orders = await effects.of(task.id, 'create-order');
      const reservations = await effects.of(task.id, 'reserve-stock');
      const charges = await effects.of(task.id, 'charge-card');
      expect(orders.map((row) => row.app)).toEqual(['A']);
      expect(reservations.map((row) => row.app)).toEqual(['A']);
      expect(charges.map((row) => row.app)).toEqual(['B']);
      expect((await effects.of(task.id, 'charge-card entered')).map((row) => row.app)).toEqual(['A', 'B']);
      expect(done.output).toEqual({
        order: { orderId: orders[0].detail.orderId },
        reservation: { reservationId: reservations[0].detail.reservationId, forOrder: orders[0].detail.orderId },
        charge: { chargeId: charges[0].detail.chargeId },
        attempt: 1,
      });
      expect(await bed.rows.completedStepKeys(task.id)).toEqual(['create-order', 'reserve-stock', 'charge-card']);
    });

    it('does not run completed @Step methods again after the reaper re-queues a task whose worker went silent', async () => {
      tripGate = new Gate();
      // No heartbeat and one task at a time: app A neither refreshes nor re-claims the task.
      // The scheduled reaper stays out of the way; this test reaps by hand.
      const appA = await startApp({
        providers: [TripWorkflow],
        duraflow: { heartbeatIntervalMs: 60_000, worker: { concurrency: 1 }, reaper: { intervalMs: 3_600_000 } },
      });
      const task = await appA.get(WorkflowService).submit('trip', {});
      await tripGate.reached.promise;

      await bed.db.client.query(`UPDATE agent_tasks SET heartbeat_at = now() - interval '1 hour' WHERE id = $1`, [task.id]);
      const reaped = await appA.get(ReaperService).reapOnce();
      expect(reaped.requeued).toEqual([task.id]);
      await bed.close(appA);
      expect(await bed.rows.task(task.id)).toMatchObject({ status: TaskStatus.PENDING, retry_count: 1 });
      expect(await bed.rows.completedStepKeys(task.id)).toEqual(['book-flight', 'book-hotel']);

      tripGate.open();
      appLabel = 'B';
      const appB = await startApp({ providers: [TripWorkflow] });
      const done = await appB.get(WorkflowService).waitFor(task.id, { timeoutMs: 15_000 });

      expect(done.status).toBe(TaskStatus.COMPLETED);
      const flights = await effects.of(task.id, 'book-flight');
      const hotels = await effects.of(task.id, 'book-hotel');
      const cars = await effects.of(task.id, 'rent-car');
      expect(flights.map((row) => row.app)).toEqual(['A']);
      expect(hotels.map((row) => row.app)).toEqual(['A']);
      expect(cars.map((row) => row.app)).toEqual(['B']);
      expect((await effects.of(task.id, 'rent-car entered')).map((row) => row.app)).toEqual(['A', 'B']);
      expect(done.output).toEqual({
        flight: { flightId: flights[0].detail.flightId },
        hotel: { hotelId: hotels[0].detail.hotelId, nearFlight: flights[0].detail.flightId },
        car: { carId: cars[0].detail.carId },
        attempt: 2,
      });
    });
  });

  describe('step keys', () => {
    it('fails the task with DUPLICATE_STEP_KEY when ctx.step.run uses a key twice, keeping the first output', async () => {
      const app = await startApp({ workflows: [duplicateKey] });
      const done = await runToEnd(app, 'duplicate-key');

      expect(done.status).toBe(TaskStatus.FAILED);
      expect(done.error).toMatchObject({ code: 'DUPLICATE_STEP_KEY', name: 'DuplicateStepKeyError' });
      expect(done.error!.message).toContain('"send-email"');
      expect((await effects.of(done.id, 'send-email')).map((row) => row.detail)).toEqual([{ which: 'first' }]);
      expect(await bed.rows.steps(done.id)).toMatchObject([{ step_key: 'send-email', status: 'completed', output: { which: 'first' } }]);
    });

    it('fails the task with DUPLICATE_STEP_KEY when a @Step method is called twice in one run', async () => {
      const app = await startApp({ providers: [NewsletterWorkflow] });
      const done = await runToEnd(app, 'newsletter');

      expect(done.status).toBe(TaskStatus.FAILED);
      expect(done.error).toMatchObject({ code: 'DUPLICATE_STEP_KEY' });
      expect((await effects.of(done.id, 'notify')).map((row) => row.detail)).toEqual([{ which: 'first' }]);
      expect(await bed.rows.steps(done.id)).toMatchObject([{ step_key: 'notify', status: 'completed', output: { which: 'first' } }]);
    });

    it('fails the task with NESTED_STEP when a step is started inside another step, without running the inner one', async () => {
      const app = await startApp({ workflows: [nestedSteps] });
      const done = await runToEnd(app, 'nested-steps');

      expect(done.status).toBe(TaskStatus.FAILED);
      expect(done.error).toMatchObject({ code: 'NESTED_STEP', name: 'NestedStepError', stepKey: 'outer' });
      expect(await effects.count(done.id, 'inner')).toBe(0);
      expect(await effects.count(done.id, 'outer')).toBe(0);
      expect(await bed.rows.steps(done.id)).toMatchObject([{ step_key: 'outer', status: 'failed', error: { code: 'NESTED_STEP' } }]);
    });

    it('fails the task with NESTED_STEP when a @Step method is called inside a ctx.step.run body', async () => {
      const app = await startApp({ providers: [NestedStepMethodWorkflow] });
      const done = await runToEnd(app, 'nested-step-method');

      expect(done.status).toBe(TaskStatus.FAILED);
      expect(done.error).toMatchObject({ code: 'NESTED_STEP', stepKey: 'outer' });
      expect(await effects.count(done.id, 'inner')).toBe(0);
      expect((await bed.rows.steps(done.id)).map((row) => row.step_key)).toEqual(['outer']);
    });
  });

  describe('retries', () => {
    it('completes a step that fails twice then succeeds with retries: 3, recording attempt 3', async () => {
      const app = await startApp({ workflows: [flakyApi] });
      const done = await runToEnd(app, 'flaky-api');

      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(done.output).toEqual({ answeredOnAttempt: 3 });
      expect(attemptsSeen.get(done.id)).toEqual([1, 2, 3]);
      expect(await effects.count(done.id, 'call-api')).toBe(3);
      expect(await bed.rows.steps(done.id)).toMatchObject([{ step_key: 'call-api', status: 'completed', attempt: 3, error: null }]);
    });

    it('makes exactly retries + 1 attempts of a step that always fails, then fails the task with STEP_FAILED', async () => {
      const app = await startApp({ workflows: [declinedPayment] });
      const done = await runToEnd(app, 'declined-payment');

      expect(done.status).toBe(TaskStatus.FAILED);
      expect(attemptsSeen.get(done.id)).toEqual([1, 2, 3]);
      expect(await effects.count(done.id, 'charge')).toBe(3);
      expect(await effects.count(done.id, 'after-charge')).toBe(0);
      expect(done.error).toEqual({
        message: 'card declined (attempt 3)',
        name: 'PaymentDeclinedError',
        stack: expect.stringContaining('card declined (attempt 3)'),
        code: 'STEP_FAILED',
        stepKey: 'charge',
        attempts: 3,
      });
      const [step] = await bed.rows.steps(done.id);
      expect(step).toMatchObject({
        step_key: 'charge',
        status: 'failed',
        attempt: 3,
        error: { message: 'card declined (attempt 3)', name: 'PaymentDeclinedError', stepKey: 'charge', attempt: 3 },
      });
    });

    it('waits at least the jitter floor of the exponential backoff between attempts', async () => {
      const app = await startApp({ workflows: [backoffProbe] });
      const done = await runToEnd(app, 'backoff-probe');

      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(attemptsSeen.get(done.id)).toEqual([1, 2, 3, 4]);
      const starts = attemptStarts.get(done.id)!;
      const gaps = starts.slice(1).map((start, i) => start - starts[i]);
      // Retry r waits between half and all of 50 * 2^(r-1) ms; 5 ms of slack for timer rounding.
      const floors = [25, 50, 100];
      gaps.forEach((gap, i) => expect(gap).toBeGreaterThanOrEqual(floors[i] - 5));
    });
  });

  describe('timeouts', () => {
    it('aborts the signal of a step that honours it when its timeout passes, counting each timeout as a failed attempt', async () => {
      const app = await startApp({ workflows: [slowHonouring] });
      const done = await runToEnd(app, 'slow-honouring');

      expect(done.status).toBe(TaskStatus.FAILED);
      expect(done.error).toMatchObject({ code: 'STEP_TIMEOUT', name: 'StepTimeoutError', stepKey: 'fetch-report', attempts: 2 });
      expect(attemptsSeen.get(done.id)).toEqual([1, 2]);
      const aborts = abortsSeen.get(done.id)!;
      expect(aborts.map(({ attempt, aborted }) => ({ attempt, aborted }))).toEqual([
        { attempt: 1, aborted: true },
        { attempt: 2, aborted: true },
      ]);
      expect(aborts.map(({ reason }) => (reason as Error).name)).toEqual(['StepTimeoutError', 'StepTimeoutError']);
      expect(await bed.rows.steps(done.id)).toMatchObject([
        { step_key: 'fetch-report', status: 'failed', attempt: 2, error: { code: 'STEP_TIMEOUT' } },
      ]);
    });

    it('times out a step that ignores its signal, and its late result is never recorded', async () => {
      lateResolutions = 0;
      const app = await startApp({ workflows: [slowIgnoring] });
      const done = await runToEnd(app, 'slow-ignoring');

      expect(done.status).toBe(TaskStatus.FAILED);
      expect(done.error).toMatchObject({ code: 'STEP_TIMEOUT', stepKey: 'fetch-report', attempts: 2 });
      expect(attemptsSeen.get(done.id)).toEqual([1, 2]);
      expect(abortsSeen.get(done.id)!.map(({ attempt, aborted }) => ({ attempt, aborted }))).toEqual([
        { attempt: 1, aborted: true },
        { attempt: 2, aborted: true },
      ]);

      await eventually('both late results have arrived', () => lateResolutions === 2);
      await sleep(100);
      expect(await bed.rows.steps(done.id)).toMatchObject([
        { step_key: 'fetch-report', status: 'failed', output: null, error: { code: 'STEP_TIMEOUT' } },
      ]);
      expect((await bed.rows.task(done.id)).status).toBe(TaskStatus.FAILED);
    });

    it('retries a step after a timeout and completes it when the next attempt answers in time', async () => {
      const app = await startApp({ workflows: [slowOnce] });
      const done = await runToEnd(app, 'slow-once');

      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(done.output).toEqual({ servedOnAttempt: 2 });
      expect(await bed.rows.steps(done.id)).toMatchObject([{ step_key: 'fetch-report', status: 'completed', attempt: 2 }]);
    });

    it("refuses a timeout or a retry delay longer than a process's timer can wait (2^31 - 1 ms), which Node would fire at once", async () => {
      for (const [step, option] of [
        [{ timeout: 2 ** 31 }, 'step.timeout'],
        [{ backoff: { maxDelayMs: 2 ** 31 } }, 'step.backoff.maxDelayMs'],
        [{ backoff: { initialDelayMs: 2 ** 31 } }, 'step.backoff.initialDelayMs'],
      ] as const) {
        const refusal = await startApp({ workflows: [slowOnce], duraflow: { step } }).catch((error: unknown) => error);
        expect(refusal).toBeInstanceOf(InvalidDuraflowOptionsError);
        expect((refusal as Error).message).toContain(option);
        expect((refusal as Error).message).toContain('ctx.sleep');
      }
      await expect(startApp({ workflows: [slowOnce], duraflow: { step: { timeout: 2 ** 31 - 1 } } })).resolves.toBeDefined();
    });
  });

  describe('JSON round trip', () => {
    it('returns the same JSON values to the run on its first execution and on replay: a Date as its ISO string, undefined, null', async () => {
      jsonGate = new Gate();
      jsonSeen.length = 0;
      const appA = await startApp({ workflows: [jsonRoundTrip] });
      const task = await appA.get(WorkflowService).submit('json-round-trip', {});
      await jsonGate.reached.promise;
      await bed.close(appA);

      jsonGate.open();
      appLabel = 'B';
      const appB = await startApp({ workflows: [jsonRoundTrip] });
      const done = await appB.get(WorkflowService).waitFor(task.id, { timeoutMs: 15_000 });

      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(jsonSeen.map((seen) => seen.app)).toEqual(['A', 'B']);
      for (const seen of jsonSeen) {
        expect(seen.date).toBe(STAMP);
        expect(seen.nothing).toBeUndefined();
        expect(seen.empty).toBeNull();
      }
      expect(done.output).toEqual({ date: STAMP, empty: null, nothingWasUndefined: true });
      const rows = await bed.rows.steps(task.id);
      expect(rows.map((row) => [row.step_key, row.output, row.output_is_sql_null])).toEqual([
        ['stamp', STAMP, false],
        ['log-only', null, true],
        ['lookup-missing', null, false],
        ['finish', null, true],
      ]);
    });

    it('fails the task with NOT_SERIALIZABLE when a step returns a BigInt, recording no output', async () => {
      const app = await startApp({ workflows: [bigintOutput] });
      const done = await runToEnd(app, 'bigint-output');

      expect(done.status).toBe(TaskStatus.FAILED);
      expect(done.error).toMatchObject({ code: 'NOT_SERIALIZABLE', stepKey: 'count-rows' });
      expect(done.error!.message).toContain('BigInt');
      expect(await bed.rows.completedStepKeys(done.id)).toEqual([]);
      expect(await effects.count(done.id, 'after-count')).toBe(0);
    });
  });

  describe('workflow outcome', () => {
    it('fails the task with WORKFLOW_FAILED and no stepKey when the workflow throws outside any step', async () => {
      const app = await startApp({ workflows: [throwsOutsideSteps] });
      const done = await runToEnd(app, 'throws-outside-steps');

      expect(done.status).toBe(TaskStatus.FAILED);
      expect(done.error).toMatchObject({
        code: 'WORKFLOW_FAILED',
        name: 'RangeError',
        message: 'cart total 5 is below the minimum of 10',
        stack: expect.stringContaining('RangeError'),
      });
      expect(done.error).not.toHaveProperty('stepKey');
      expect(await bed.rows.completedStepKeys(done.id)).toEqual(['load-cart']);
    });

    it('completes a workflow that catches a failed step and carries on', async () => {
      const app = await startApp({ workflows: [recoversFromStep] });
      const done = await runToEnd(app, 'recovers-from-step');

      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(done.output).toEqual({ quote: { price: 100, source: 'fallback' }, total: 200 });
      expect(await bed.rows.steps(done.id)).toMatchObject([{ step_key: 'fetch-quote', status: 'failed' }]);
    });

    it("stores the workflow's return value in agent_tasks.output", async () => {
      const app = await startApp({ workflows: [returnsValue] });
      const done = await runToEnd(app, 'returns-value', { a: 2, b: 40 });

      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect((await bed.rows.task(done.id)).output).toEqual({ sum: 42, label: 'sum is 42', items: [42, null, true] });
      expect((await bed.rows.task(done.id)).error).toBeNull();
    });
  });

  describe('cancellation', () => {
    it('aborts the running step of a cancelled task, starts no further step and stays cancelled', async () => {
      approvalGate = new Gate();
      const app = await startApp({ workflows: [awaitsApproval] });
      const workflows = app.get(WorkflowService);
      const worker = app.get(WorkerService);
      const task = await workflows.submit('awaits-approval', {});
      await approvalGate.reached.promise;

      const cancelled = await workflows.cancel(task.id);
      expect(cancelled.status).toBe(TaskStatus.CANCELLED);
      await eventually("the running step's signal aborted", () => approvalGate.aborts.length === 1);
      await eventually('the worker let go of the run', () => worker.stats().running === 0);

      // Even if the step's external wait ends now, nothing more may happen to the task.
      approvalGate.open();
      await sleep(500);
      expect(worker.stats()).toMatchObject({ stopped: 1, completed: 0, failed: 0 });
      expect(await effects.count(task.id, 'reserve')).toBe(1);
      expect(await effects.count(task.id, 'await-approval')).toBe(0);
      expect(await effects.count(task.id, 'ship')).toBe(0);
      expect(await bed.rows.completedStepKeys(task.id)).toEqual(['reserve']);
      expect(await bed.rows.task(task.id)).toMatchObject({ status: TaskStatus.CANCELLED, output: null });
    });
  });

  describe('fencing', () => {
    it('writes no checkpoint and does not complete the task when the claim was replaced while a step ran', async () => {
      fencedGate = new Gate();
      // No heartbeat during the test: only the checkpoint itself can notice the lost claim.
      const app = await startApp({ workflows: [fenced], duraflow: { heartbeatIntervalMs: 60_000 } });
      const worker = app.get(WorkerService);
      const task = await app.get(WorkflowService).submit('fenced', {});
      await fencedGate.reached.promise;

      await bed.db.client.query(`UPDATE agent_tasks SET claim_token = gen_random_uuid() WHERE id = $1`, [task.id]);
      fencedGate.open();
      await eventually('the worker stopped the run', () => worker.stats().stopped === 1);

      expect(await effects.count(task.id, 'blocked')).toBe(1);
      expect(await effects.count(task.id, 'after')).toBe(0);
      expect(await bed.rows.completedStepKeys(task.id)).toEqual(['before']);
      expect(await bed.rows.task(task.id)).toMatchObject({ status: TaskStatus.RUNNING, output: null });
      expect(worker.stats()).toMatchObject({ completed: 0, failed: 0 });
    });
  });
});
