import { randomUUID } from 'node:crypto';
import { TestingModule } from '@nestjs/testing';
import {
  DuraflowError,
  DuraflowModule,
  InputTooLargeError,
  InputValidationError,
  InvalidDuraflowOptionsError,
  InvalidSubmitOptionsError,
  InvalidWorkflowDefinitionError,
  InvalidWorkflowNameError,
  NotSerializableError,
  SubmitOptions,
  TaskAlreadyFinishedError,
  TaskNotFoundError,
  TaskStatus,
  UnknownWorkflowError,
  Workflow,
  workflow,
  WorkflowContext,
  WorkflowService,
} from '@duraflow/nestjs';
import { resolveDuraflowOptions } from '@duraflow/nestjs/config/resolved-options';
import { BookingInput, BookingWorkflow } from './fixtures/definitions/booking.workflow';
import { FlightsApi } from './fixtures/definitions/flights-api';
import { useTestBed } from './support/test-bed';

const MAX_INPUT_BYTES = 512;
const LONGEST_NAME = 'n'.repeat(255);
const WAIT = { timeoutMs: 10_000 };

const echoWorkflow = workflow('echo', async (ctx: WorkflowContext) => ({ received: ctx.input }));
const longestNameWorkflow = workflow(LONGEST_NAME, async () => 'ok');
const punctuatedNameWorkflow = workflow('Echo_v2-beta', async () => 'ok');

const validBooking = { passenger: 'Ada Lovelace', seats: 2, route: { from: 'LHR', to: 'JFK' } };
const bookingWithUnknowns = { ...validBooking, isAdmin: true, route: { ...validBooking.route, via: 'DUB' } };

/** The booking DTO, refusing properties it does not declare. */
@Workflow('booking-strict', { input: BookingInput, unknownInputProperties: 'reject' })
class StrictBookingWorkflow {
  async run(ctx: WorkflowContext<BookingInput>) {
    return ctx.input;
  }
}

/** The booking DTO, stripping what it does not declare even where the module default is 'reject'. */
@Workflow('booking-lenient', { input: BookingInput, unknownInputProperties: 'strip' })
class LenientBookingWorkflow {
  async run(ctx: WorkflowContext<BookingInput>) {
    return ctx.input;
  }
}

/** The booking DTO with the module's default. */
@Workflow('booking-default', { input: BookingInput })
class DefaultBookingWorkflow {
  async run(ctx: WorkflowContext<BookingInput>) {
    return ctx.input;
  }
}

/** `{"blob":"…"}`, exactly `bytes` bytes of JSON: `fill` repeated, topped up with "x". */
function inputOfBytes(bytes: number, fill = 'x'): { blob: string } {
  const room = bytes - Buffer.byteLength(JSON.stringify({ blob: '' }), 'utf8');
  const fillBytes = Buffer.byteLength(fill, 'utf8');
  const input = { blob: fill.repeat(Math.floor(room / fillBytes)) + 'x'.repeat(room % fillBytes) };
  expect(Buffer.byteLength(JSON.stringify(input), 'utf8')).toBe(bytes);
  return input;
}

describe('submit validation (bad input gets a typed error and writes nothing)', () => {
  const bed = useTestBed();
  let app: TestingModule;
  let workflows: WorkflowService;

  beforeAll(async () => {
    app = await bed.start({
      providers: [FlightsApi, BookingWorkflow, StrictBookingWorkflow],
      duraflow: {
        maxInputBytes: MAX_INPUT_BYTES,
        workflows: [echoWorkflow, longestNameWorkflow, punctuatedNameWorkflow],
      },
    });
    workflows = app.get(WorkflowService);
  });

  const taskCount = () => bed.rows.count('agent_tasks');

  /** Runs `attempt`, expects it to reject with `type` and `code`, and checks no task row appeared. */
  async function expectRejectedWithoutWrite<T extends DuraflowError>(
    attempt: () => Promise<unknown>,
    type: abstract new (...args: any[]) => T,
    code: string,
  ): Promise<T> {
    const before = await taskCount();
    const error = await attempt().then(
      (value) => {
        throw new Error(`expected ${type.name}, but the call resolved with ${JSON.stringify(value)}`);
      },
      (reason: unknown) => reason,
    );
    expect(error).toBeInstanceOf(type);
    expect(error).toBeInstanceOf(DuraflowError);
    expect((error as T).code).toBe(code);
    expect(await taskCount()).toBe(before);
    return error as T;
  }

  async function storedInput(id: string): Promise<unknown> {
    return (await bed.rows.task(id)).input;
  }

  describe('workflow names', () => {
    it('rejects an unknown workflow with UnknownWorkflowError naming it and the registered ones, and writes nothing', async () => {
      const error = await expectRejectedWithoutWrite(
        () => workflows.submit('no-such-workflow', {}),
        UnknownWorkflowError,
        'UNKNOWN_WORKFLOW',
      );
      expect(error.workflowName).toBe('no-such-workflow');
      expect(error.message).toContain('"no-such-workflow"');
      expect(error.message).toContain('"echo"');
      expect(error.message).toContain('"booking"');
    });

    it.each([
      ['an empty name', ''],
      ['a name of 256 characters', 'n'.repeat(256)],
      ['a name with spaces', 'send email'],
      ['a name with a leading space', ' echo'],
      ['a name with unicode letters', 'réservation'],
      ['a name with an emoji', 'echo🚀'],
      ['a name with a dot', 'echo.v2'],
      ['a name with a slash', 'billing/charge'],
      ['a name with a newline', 'echo\n'],
    ])('rejects %s with InvalidWorkflowNameError and writes nothing', async (_, name) => {
      const error = await expectRejectedWithoutWrite(() => workflows.submit(name, {}), InvalidWorkflowNameError, 'INVALID_WORKFLOW_NAME');
      expect(error.workflowName).toBe(name);
      expect(error.message).toContain(JSON.stringify(name));
    });

    it.each([
      ['a number', 42],
      ['null', null],
      ['undefined', undefined],
    ])('rejects a workflow name that is %s with InvalidWorkflowNameError and writes nothing', async (_, name) => {
      await expectRejectedWithoutWrite(
        () => workflows.submit(name as unknown as string, {}),
        InvalidWorkflowNameError,
        'INVALID_WORKFLOW_NAME',
      );
    });

    it('accepts a registered name of exactly 255 characters', async () => {
      const task = await workflows.submit(LONGEST_NAME, {});
      expect(task.workflowName).toBe(LONGEST_NAME);
      expect(task.status).toBe(TaskStatus.PENDING);
    });

    it('accepts a registered name made of letters, digits, "-" and "_"', async () => {
      const task = await workflows.submit('Echo_v2-beta', {});
      expect(task.workflowName).toBe('Echo_v2-beta');
    });

    it('treats workflow names as case-sensitive', async () => {
      await expectRejectedWithoutWrite(() => workflows.submit('ECHO', {}), UnknownWorkflowError, 'UNKNOWN_WORKFLOW');
    });
  });

  describe('input against the workflow DTO', () => {
    it('rejects input that fails the workflow DTO and writes nothing, naming each property', async () => {
      const error = await expectRejectedWithoutWrite(
        () => workflows.submit('booking', { passenger: '', seats: 0, route: validBooking.route }),
        InputValidationError,
        'INVALID_INPUT',
      );
      expect(error.violations).toEqual(
        expect.arrayContaining([
          { property: 'passenger', constraints: expect.objectContaining({ isLength: expect.any(String) }) },
          { property: 'seats', constraints: expect.objectContaining({ min: expect.any(String) }) },
        ]),
      );
      expect(error.violations).toHaveLength(2);
      expect(error.message).toContain('passenger');
      expect(error.message).toContain('seats');
    });

    it('rejects input whose nested @ValidateNested property fails and names it by its dotted path', async () => {
      const error = await expectRejectedWithoutWrite(
        () => workflows.submit('booking', { ...validBooking, route: { from: 'LHR', to: 'NEWYORK' } }),
        InputValidationError,
        'INVALID_INPUT',
      );
      expect(error.violations).toEqual([{ property: 'route.to', constraints: expect.objectContaining({ isLength: expect.any(String) }) }]);
      expect(error.message).toContain('route.to');
    });

    it('rejects input with a wrongly typed property (a string where the DTO wants an integer)', async () => {
      const error = await expectRejectedWithoutWrite(
        () => workflows.submit('booking', { ...validBooking, seats: '2' }),
        InputValidationError,
        'INVALID_INPUT',
      );
      expect(error.violations.map((v) => v.property)).toEqual(['seats']);
      expect(error.violations[0].constraints).toHaveProperty('isInt');
    });

    it('rejects input missing a required property', async () => {
      const { passenger: _omitted, ...withoutPassenger } = validBooking;
      const error = await expectRejectedWithoutWrite(
        () => workflows.submit('booking', withoutPassenger),
        InputValidationError,
        'INVALID_INPUT',
      );
      expect(error.violations.map((v) => v.property)).toEqual(['passenger']);
    });

    it.each([
      ['a string', 'LHR-JFK'],
      ['an array', [validBooking]],
      ['null', null],
    ])('rejects input that is %s where the DTO wants an object', async (_, input) => {
      const error = await expectRejectedWithoutWrite(() => workflows.submit('booking', input), InputValidationError, 'INVALID_INPUT');
      expect(error.violations.length).toBeGreaterThan(0);
    });

    it('rejects a missing input when the DTO has required properties', async () => {
      const error = await expectRejectedWithoutWrite(() => workflows.submit('booking'), InputValidationError, 'INVALID_INPUT');
      expect(error.violations.map((v) => v.property).sort()).toEqual(['passenger', 'route', 'seats']);
    });

    it('accepts input that satisfies the DTO and stores it as submitted', async () => {
      const task = await workflows.submit('booking', validBooking);
      expect(task.input).toEqual(validBooking);
      expect(await storedInput(task.id)).toEqual(validBooking);
      const done = await workflows.waitFor(task.id, WAIT);
      expect(done.status).toBe(TaskStatus.COMPLETED);
    });
  });

  describe('input properties the DTO does not declare', () => {
    it('strips them by default, at every level the DTO validates, and stores and runs the input as validated', async () => {
      const task = await workflows.submit('booking', bookingWithUnknowns);

      expect(task.input).toEqual(validBooking);
      expect(await storedInput(task.id)).toEqual(validBooking);
      const done = await workflows.waitFor(task.id, WAIT);
      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(done.output).toEqual(expect.objectContaining({ passenger: validBooking.passenger, seats: 2 }));
    });

    it('compares the stripped input for an idempotency key: a retry with an extra property gets the first task', async () => {
      const first = await workflows.submitWithResult('booking', validBooking, { idempotencyKey: 'strip-retry' });
      const again = await workflows.submitWithResult('booking', { ...validBooking, trackingId: 'x-1' }, { idempotencyKey: 'strip-retry' });
      expect(again).toEqual({ task: expect.objectContaining({ id: first.task.id }), created: false });
    });

    it("refuses them with InputValidationError naming each one when the workflow says 'reject', and writes nothing", async () => {
      const error = await expectRejectedWithoutWrite(
        () => workflows.submit('booking-strict', bookingWithUnknowns),
        InputValidationError,
        'INVALID_INPUT',
      );
      expect(error.violations).toEqual([
        { property: 'isAdmin', constraints: { whitelistValidation: expect.stringContaining('isAdmin') } },
        { property: 'route.via', constraints: { whitelistValidation: expect.stringContaining('via') } },
      ]);
      expect(error.message).toContain('route.via');
    });

    it('names the index of the refused input in submitMany, and writes none of them', async () => {
      const error = await expectRejectedWithoutWrite(
        () => workflows.submitMany('booking-strict', [validBooking, { ...validBooking, note: 'hi' }]),
        InputValidationError,
        'INVALID_INPUT',
      );
      expect(error.violations.map((v) => v.property)).toEqual(['[1].note']);
    });

    it("accepts input without unknown properties under 'reject'", async () => {
      const task = await workflows.submit('booking-strict', validBooking);
      expect(await storedInput(task.id)).toEqual(validBooking);
    });
  });

  describe("the module's unknownInputProperties default", () => {
    let strictApp: TestingModule;
    let strict: WorkflowService;

    beforeAll(async () => {
      strictApp = await bed.start({
        providers: [DefaultBookingWorkflow, LenientBookingWorkflow],
        duraflow: { worker: { enabled: false }, reaper: { enabled: false }, unknownInputProperties: 'reject' },
      });
      strict = strictApp.get(WorkflowService);
    });

    afterAll(() => bed.close(strictApp));

    it("refuses unknown properties for the workflows that do not say, with the module default 'reject'", async () => {
      const error = await expectRejectedWithoutWrite(
        () => strict.submit('booking-default', bookingWithUnknowns),
        InputValidationError,
        'INVALID_INPUT',
      );
      expect(error.violations.map((v) => v.property)).toEqual(['isAdmin', 'route.via']);
    });

    it("lets a workflow's own 'strip' win over the module default", async () => {
      const task = await strict.submit('booking-lenient', bookingWithUnknowns);
      expect(await storedInput(task.id)).toEqual(validBooking);
    });

    it('refuses a value other than strip or reject, in the module options or (at boot) in a workflow', async () => {
      expect(() => resolveDuraflowOptions({ unknownInputProperties: 'ignore' as never })).toThrow(InvalidDuraflowOptionsError);
      const error = await bed.bootFailure({
        duraflowModule: DuraflowModule.forRoot({
          workflows: [workflow('odd', async () => 1, { input: BookingInput, unknownInputProperties: 'keep' as never })],
        }),
      });
      expect(error).toBeInstanceOf(InvalidWorkflowDefinitionError);
      expect((error as Error).message).toContain('unknownInputProperties');
    });
  });

  describe('input that is not JSON', () => {
    const circular: Record<string, unknown> = { name: 'loop' };
    circular.self = circular;

    it.each([
      ['a circular reference', circular, '$.self'],
      ['a BigInt', { amount: BigInt(10) }, '$.amount'],
      ['a function', { callback: () => 1 }, '$.callback'],
      ['a symbol', { tag: Symbol('tag') }, '$.tag'],
      ['NaN', { ratio: NaN }, '$.ratio'],
      ['Infinity', { limit: Infinity }, '$.limit'],
      ['-Infinity', { nested: { floor: -Infinity } }, '$.nested.floor'],
      ['a Map', { seats: new Map([['1A', 'ada']]) }, '$.seats'],
      ['a Set', { tags: new Set(['a']) }, '$.tags'],
      ['undefined in an array', { items: [1, undefined, 3] }, '$.items[1]'],
      ['a function in an array', { items: [() => 1] }, '$.items[0]'],
      ['a top-level BigInt', BigInt(1), '$'],
      ['an invalid Date', { departure: new Date('not a date') }, '$.departure'],
      // eslint-disable-next-line no-sparse-arrays -- the hole is what this case is about
      ['a hole in a sparse array', { items: [1, , 3] }, '$.items[1]'],
    ])('rejects input containing %s with NotSerializableError naming the path, and writes nothing', async (_, input, path) => {
      const error = await expectRejectedWithoutWrite(() => workflows.submit('echo', input), NotSerializableError, 'NOT_SERIALIZABLE');
      expect(error.path).toBe(path);
      expect(error.message).toContain(path);
      expect(error.message).toContain('"echo"');
    });

    it('checks serializability before the DTO, so a DTO workflow also gets NotSerializableError', async () => {
      await expectRejectedWithoutWrite(
        () => workflows.submit('booking', { ...validBooking, seats: BigInt(2) }),
        NotSerializableError,
        'NOT_SERIALIZABLE',
      );
    });

    it('accepts a Date inside the input and stores it as its ISO string', async () => {
      const at = new Date('2024-01-02T03:04:05.678Z');
      const task = await workflows.submit('echo', { departure: at, legs: [at] });

      expect(await storedInput(task.id)).toEqual({ departure: '2024-01-02T03:04:05.678Z', legs: ['2024-01-02T03:04:05.678Z'] });
      const done = await workflows.waitFor(task.id, WAIT);
      expect(done.output).toEqual({ received: { departure: '2024-01-02T03:04:05.678Z', legs: ['2024-01-02T03:04:05.678Z'] } });
    });

    it('accepts an object with an undefined property and stores it without that property', async () => {
      const task = await workflows.submit('echo', { kept: 1, optional: undefined });
      expect(await storedInput(task.id)).toEqual({ kept: 1 });
      const { rows } = await bed.db.client.query(`SELECT input ? 'optional' AS has_optional FROM agent_tasks WHERE id = $1`, [task.id]);
      expect(rows[0].has_optional).toBe(false);
    });

    it('accepts the same object twice in one input when it is not a cycle', async () => {
      const shared = { code: 'LHR' };
      const task = await workflows.submit('echo', { from: shared, via: shared, nulls: [null], deep: [[1, [2]]] });
      expect(await storedInput(task.id)).toEqual({ from: { code: 'LHR' }, via: { code: 'LHR' }, nulls: [null], deep: [[1, [2]]] });
    });

    it('stores a missing input as an empty object', async () => {
      const task = await workflows.submit('echo');
      expect(await storedInput(task.id)).toEqual({});
    });
  });

  describe('input nesting (maxJsonDepth, default 100)', () => {
    /** `[[[…]]]`, `depth` arrays deep. */
    const nestedArrays = (depth: number): unknown => JSON.parse('['.repeat(depth) + ']'.repeat(depth));

    it.each([3_000, 5_000, 100_000])(
      'rejects input nested %i levels deep with InputValidationError before anything recurses into it, and writes nothing',
      async (depth) => {
        const error = await expectRejectedWithoutWrite(
          () => workflows.submit('echo', nestedArrays(depth)),
          InputValidationError,
          'INVALID_INPUT',
        );
        expect(error.violations).toEqual([
          { property: `${'[0]'.repeat(100)}`, constraints: { maxDepth: expect.stringContaining('deeper than 100 levels') } },
        ]);
        expect(error.message).toMatch(/input must not nest objects and arrays deeper than 100 levels \(DuraflowModule's maxJsonDepth\)/);
      },
    );

    it('checks the nesting before the DTO (class-transformer would overflow the stack), naming the property', async () => {
      const error = await expectRejectedWithoutWrite(
        () => workflows.submit('booking', { ...validBooking, route: { from: 'LHR', to: 'JFK', via: nestedArrays(5_000) } }),
        InputValidationError,
        'INVALID_INPUT',
      );
      expect(error.violations[0].property).toBe(`route.via${'[0]'.repeat(98)}`);
    });

    it('names the index of the input in submitMany', async () => {
      const error = await expectRejectedWithoutWrite(
        () => workflows.submitMany('echo', [{}, { tree: nestedArrays(4_000) }]),
        InputValidationError,
        'INVALID_INPUT',
      );
      expect(error.violations[0].property).toBe(`[1].tree${'[0]'.repeat(99)}`);
    });

    it('accepts input exactly 100 levels deep, and still names a cycle as not serializable', async () => {
      const task = await workflows.submit('echo', nestedArrays(100));
      expect(await storedInput(task.id)).toEqual(nestedArrays(100));

      const looped: Record<string, unknown> = { name: 'loop' };
      looped.self = looped;
      const error = await expectRejectedWithoutWrite(() => workflows.submit('echo', looped), NotSerializableError, 'NOT_SERIALIZABLE');
      expect(error.path).toBe('$.self');
    });
  });

  describe('input size', () => {
    it('accepts input of exactly maxInputBytes', async () => {
      const input = inputOfBytes(MAX_INPUT_BYTES);
      const task = await workflows.submit('echo', input);
      expect(await storedInput(task.id)).toEqual(input);
    });

    it('rejects input one byte over maxInputBytes with InputTooLargeError and writes nothing', async () => {
      const error = await expectRejectedWithoutWrite(
        () => workflows.submit('echo', inputOfBytes(MAX_INPUT_BYTES + 1)),
        InputTooLargeError,
        'INPUT_TOO_LARGE',
      );
      expect(error.bytes).toBe(MAX_INPUT_BYTES + 1);
      expect(error.limit).toBe(MAX_INPUT_BYTES);
      expect(error.message).toContain(String(MAX_INPUT_BYTES));
    });

    it('counts the limit in UTF-8 bytes, not characters', async () => {
      // "é" is two bytes: under the limit in characters, over it in bytes.
      const input = { blob: 'é'.repeat(MAX_INPUT_BYTES / 2) };
      expect(JSON.stringify(input).length).toBeLessThan(MAX_INPUT_BYTES);
      await expectRejectedWithoutWrite(() => workflows.submit('echo', input), InputTooLargeError, 'INPUT_TOO_LARGE');
    });

    it('accepts multi-byte input of exactly maxInputBytes', async () => {
      const input = inputOfBytes(MAX_INPUT_BYTES, 'é');
      const task = await workflows.submit('echo', input);
      expect(await storedInput(task.id)).toEqual(input);
    });
  });

  describe('submit options', () => {
    const farFuture = new Date('2999-01-01T00:00:00.000Z');

    it.each<[string, SubmitOptions, string]>([
      ['a non-integer priority', { priority: 1.5 }, 'priority'],
      ['a NaN priority', { priority: NaN }, 'priority'],
      ['a priority beyond 32 bits', { priority: 2 ** 31 }, 'priority'],
      ['a priority given as a string', { priority: '5' as unknown as number }, 'priority'],
      ['an unparseable scheduledAt string', { scheduledAt: 'next tuesday' }, 'scheduledAt'],
      ['an invalid Date as scheduledAt', { scheduledAt: new Date('nope') }, 'scheduledAt'],
      ['a negative maxRetries', { maxRetries: -1 }, 'maxRetries'],
      ['a non-integer maxRetries', { maxRetries: 2.5 }, 'maxRetries'],
      ['an empty idempotencyKey', { idempotencyKey: '' }, 'idempotencyKey'],
      ['an idempotencyKey of 256 characters', { idempotencyKey: 'k'.repeat(256) }, 'idempotencyKey'],
      ['an idempotencyKey that is not a string', { idempotencyKey: 7 as unknown as string }, 'idempotencyKey'],
    ])('rejects %s with InvalidSubmitOptionsError and writes nothing', async (_, options, option) => {
      const error = await expectRejectedWithoutWrite(
        () => workflows.submit('echo', {}, options),
        InvalidSubmitOptionsError,
        'INVALID_SUBMIT_OPTIONS',
      );
      expect(error.option).toBe(option);
      expect(error.message).toContain(option);
    });

    it('accepts valid options and stores them on the task', async () => {
      const task = await workflows.submit(
        'echo',
        {},
        {
          priority: -7,
          scheduledAt: farFuture,
          maxRetries: 0,
          idempotencyKey: 'k'.repeat(255),
        },
      );
      const { rows } = await bed.db.client.query(
        'SELECT priority, scheduled_at, max_retries, idempotency_key, status FROM agent_tasks WHERE id = $1',
        [task.id],
      );
      expect(rows[0]).toEqual({
        priority: -7,
        scheduled_at: farFuture,
        max_retries: 0,
        idempotency_key: 'k'.repeat(255),
        status: 'pending',
      });
    });

    it('accepts the whole 32-bit range of priorities', async () => {
      const lowest = await workflows.submit('echo', {}, { priority: -(2 ** 31), scheduledAt: farFuture });
      const highest = await workflows.submit('echo', {}, { priority: 2 ** 31 - 1, scheduledAt: farFuture });
      expect(lowest.priority).toBe(-(2 ** 31));
      expect(highest.priority).toBe(2 ** 31 - 1);
    });

    it('rejects a priority below the 32-bit range', async () => {
      await expectRejectedWithoutWrite(
        () => workflows.submit('echo', {}, { priority: -(2 ** 31) - 1 }),
        InvalidSubmitOptionsError,
        'INVALID_SUBMIT_OPTIONS',
      );
    });

    it('accepts scheduledAt as an ISO-8601 string', async () => {
      const task = await workflows.submit('echo', {}, { scheduledAt: '2999-06-01T12:00:00Z' });
      expect(task.scheduledAt?.toISOString()).toBe('2999-06-01T12:00:00.000Z');
    });

    it('checks the options before the input, so nothing is validated twice or written', async () => {
      await expectRejectedWithoutWrite(
        () => workflows.submit('booking', validBooking, { maxRetries: -1 }),
        InvalidSubmitOptionsError,
        'INVALID_SUBMIT_OPTIONS',
      );
    });
  });

  describe('cancel, waitFor and get', () => {
    it('rejects cancel of a completed task with TaskAlreadyFinishedError and leaves it unchanged', async () => {
      const task = await workflows.submit('echo', { n: 1 });
      const done = await workflows.waitFor(task.id, WAIT);
      expect(done.status).toBe(TaskStatus.COMPLETED);

      const error = await expectRejectedWithoutWrite(() => workflows.cancel(task.id), TaskAlreadyFinishedError, 'TASK_ALREADY_FINISHED');
      expect(error.taskId).toBe(task.id);
      expect(error.status).toBe('completed');
      expect(error.message).toContain(task.id);

      const after = await workflows.get(task.id);
      expect(after?.status).toBe(TaskStatus.COMPLETED);
      expect(after?.updatedAt).toEqual(done.updatedAt);
      expect(after?.completedAt).toEqual(done.completedAt);
    });

    it('rejects a second cancel of a cancelled task with TaskAlreadyFinishedError', async () => {
      const task = await workflows.submit('echo', {}, { scheduledAt: new Date('2999-01-01T00:00:00Z') });
      const cancelled = await workflows.cancel(task.id);
      expect(cancelled.status).toBe(TaskStatus.CANCELLED);

      const error = await expectRejectedWithoutWrite(() => workflows.cancel(task.id), TaskAlreadyFinishedError, 'TASK_ALREADY_FINISHED');
      expect(error.status).toBe('cancelled');
      expect((await workflows.get(task.id))?.updatedAt).toEqual(cancelled.updatedAt);
    });

    it('rejects cancel of an unknown id with TaskNotFoundError', async () => {
      const id = randomUUID();
      const error = await expectRejectedWithoutWrite(() => workflows.cancel(id), TaskNotFoundError, 'TASK_NOT_FOUND');
      expect(error.taskId).toBe(id);
      expect(error.message).toContain(id);
    });

    it('rejects cancel of a malformed id with TaskNotFoundError', async () => {
      await expectRejectedWithoutWrite(() => workflows.cancel('not-a-uuid'), TaskNotFoundError, 'TASK_NOT_FOUND');
    });

    it('rejects waitFor of an unknown id with TaskNotFoundError', async () => {
      const id = randomUUID();
      const error = await expectRejectedWithoutWrite(
        () => workflows.waitFor(id, { timeoutMs: 5_000 }),
        TaskNotFoundError,
        'TASK_NOT_FOUND',
      );
      expect(error.taskId).toBe(id);
    });

    it('rejects waitFor of a malformed id with TaskNotFoundError', async () => {
      await expectRejectedWithoutWrite(
        () => workflows.waitFor("'; DROP TABLE agent_tasks; --", { timeoutMs: 5_000 }),
        TaskNotFoundError,
        'TASK_NOT_FOUND',
      );
    });

    it.each([
      ['an unknown id', randomUUID()],
      ['a malformed id', 'not-a-uuid'],
      ['an empty id', ''],
      ['a uuid with a trailing character', `${randomUUID()}x`],
      ['an injection attempt', "'; DROP TABLE agent_tasks; --"],
    ])('returns null from get for %s', async (_, id) => {
      await expect(workflows.get(id)).resolves.toBeNull();
    });

    it('returns the task from get for a known id', async () => {
      const task = await workflows.submit('echo', { n: 2 });
      const found = await workflows.get(task.id);
      expect(found?.id).toBe(task.id);
      expect(found?.workflowName).toBe('echo');
    });
  });
});
