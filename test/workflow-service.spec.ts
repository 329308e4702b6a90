import { TestingModule } from '@nestjs/testing';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import {
  IdempotencyKeyConflictError,
  InvalidCursorError,
  InvalidListOptionsError,
  InvalidWaitOptionsError,
  SagaService,
  TaskAlreadyFinishedError,
  TaskNotFoundError,
  TaskStatus,
  WaitForTimeoutError,
  WorkerService,
  Workflow,
  WorkflowContext,
  workflow,
  WorkflowService,
} from '@duraflow/nestjs';
import { TASK_FINISHED_CHANNEL } from '../libs/duraflow/src/domain/duraflow.constants';
import { TaskNotifications } from '../libs/duraflow/src/notifications/task-notifications';
import { StepBarrier } from './fixtures/steps/barrier';
import { SUBMIT_ONLY, useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';
import { TaskStore } from '../libs/duraflow/src/persistence/task.store';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A workflow that records the input of every run it executes, and echoes it. */
function recordingWorkflow(name: string, runs: unknown[], options: { maxRetries?: number } = {}) {
  return workflow(
    name,
    async (ctx: WorkflowContext) => {
      await ctx.step.run('record', () => {
        runs.push(ctx.input);
      });
      return { echo: ctx.input };
    },
    options,
  );
}

@Workflow('decorated-retries', { maxRetries: 2 })
class DecoratedRetriesWorkflow {
  async run() {
    return null;
  }
}

describe('WorkflowService', () => {
  const bed = useTestBed({ databasePerTest: true });

  /** waitFor calls listening for finished tasks right now. */
  function finishedListeners(app: TestingModule): number {
    return app.get(TaskNotifications)['listeners'].get(TASK_FINISHED_CHANNEL)!.size;
  }

  describe('submit', () => {
    it('returns the pending task it created, with priority 0 and the module default of 3 retries', async () => {
      const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [recordingWorkflow('plain', [])] } });
      const workflows = app.get(WorkflowService);

      const task = await workflows.submit('plain', { orderId: 42 });

      expect(task.id).toMatch(UUID);
      expect(task).toMatchObject({
        workflowName: 'plain',
        status: TaskStatus.PENDING,
        input: { orderId: 42 },
        priority: 0,
        maxRetries: 3,
        retryCount: 0,
        scheduledAt: null,
        startedAt: null,
        workerId: null,
        idempotencyKey: null,
      });
      expect(task.createdAt).toBeInstanceOf(Date);
      expect(await workflows.get(task.id)).toEqual(task);
      expect(await bed.rows.count('agent_tasks')).toBe(1);
    });

    it('takes maxRetries from the submit option, else the workflow option, else the module option', async () => {
      const app = await bed.start({
        duraflow: {
          ...SUBMIT_ONLY,
          maxRetries: 5,
          workflows: [recordingWorkflow('plain', []), recordingWorkflow('careful', [], { maxRetries: 7 })],
        },
        providers: [DecoratedRetriesWorkflow],
      });
      const workflows = app.get(WorkflowService);

      const moduleDefault = await workflows.submit('plain', {});
      const functionalOption = await workflows.submit('careful', {});
      const decoratedOption = await workflows.submit('decorated-retries', {});
      const submitOverWorkflow = await workflows.submit('careful', {}, { maxRetries: 1 });
      const submitZero = await workflows.submit('plain', {}, { maxRetries: 0, priority: 5 });

      expect([moduleDefault, functionalOption, decoratedOption, submitOverWorkflow, submitZero].map((t) => t.maxRetries)).toEqual([
        5, 7, 2, 1, 0,
      ]);
      expect(submitZero.priority).toBe(5);
      const { rows } = await bed.db.client.query(`SELECT max_retries FROM agent_tasks WHERE id = $1`, [submitOverWorkflow.id]);
      expect(rows[0].max_retries).toBe(1);
    });
  });

  describe('submitMany', () => {
    it('creates every task in one call, in input order, and a worker runs them all', async () => {
      const runs: unknown[] = [];
      const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [recordingWorkflow('bulk', runs)] } });
      const workflows = app.get(WorkflowService);
      const inputs = Array.from({ length: 25 }, (_, n) => ({ n }));

      const tasks = await workflows.submitMany('bulk', inputs, { priority: 3, maxRetries: 1 });

      expect(tasks.map((task) => task.input)).toEqual(inputs);
      for (const task of tasks)
        expect(task).toMatchObject({ status: TaskStatus.PENDING, priority: 3, maxRetries: 1, workflowName: 'bulk' });
      expect(new Set(tasks.map((task) => task.id)).size).toBe(25);
      expect(await bed.rows.count('agent_tasks')).toBe(25);
      expect(await workflows.submitMany('bulk', [])).toEqual([]);

      await app.get(WorkerService).start();
      for (const task of tasks) expect((await workflows.waitFor(task.id)).status).toBe(TaskStatus.COMPLETED);
      expect(runs).toHaveLength(25);
    });

    it('writes nothing when one input is bad, and names its index', async () => {
      const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [recordingWorkflow('bulk', [])] } });
      const workflows = app.get(WorkflowService);

      await expect(workflows.submitMany('bulk', [{ ok: 1 }, { bad: () => 1 }])).rejects.toMatchObject({
        code: 'NOT_SERIALIZABLE',
        message: expect.stringContaining('index 1'),
      });
      await expect(workflows.submitMany('bulk', [{}], { idempotencyKey: 'k' } as never)).rejects.toMatchObject({
        code: 'INVALID_SUBMIT_OPTIONS',
      });
      await expect(workflows.submitMany('nope', [{}])).rejects.toMatchObject({ code: 'UNKNOWN_WORKFLOW' });
      expect(await bed.rows.count('agent_tasks')).toBe(0);
    });
  });

  describe('idempotency', () => {
    it('returns the first task for a repeated idempotency key with the same input and creates nothing new', async () => {
      const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [recordingWorkflow('plain', [])] } });
      const workflows = app.get(WorkflowService);

      const first = await workflows.submit('plain', { attempt: 1 }, { idempotencyKey: 'order-1' });
      const again = await workflows.submit('plain', { attempt: 1 }, { idempotencyKey: 'order-1' });
      const other = await workflows.submit('plain', { attempt: 3 }, { idempotencyKey: 'order-2' });

      expect(again.id).toBe(first.id);
      expect(again.input).toEqual({ attempt: 1 });
      expect(again.idempotencyKey).toBe('order-1');
      expect(other.id).not.toBe(first.id);
      expect(await bed.rows.count('agent_tasks')).toBe(2);
    });

    it('compares inputs as JSON values: another key order or number spelling is the same input', async () => {
      const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [recordingWorkflow('plain', [])] } });
      const workflows = app.get(WorkflowService);

      const first = await workflows.submit('plain', { a: 1, b: { c: [1, 2], d: 'x' } }, { idempotencyKey: 'k' });
      const again = await workflows.submit('plain', { b: { d: 'x', c: [1, 2.0] }, a: 1.0 }, { idempotencyKey: 'k' });

      expect(again.id).toBe(first.id);
      expect(await bed.rows.count('agent_tasks')).toBe(1);
    });

    it('refuses a repeated idempotency key with another input (IdempotencyKeyConflictError) and writes nothing', async () => {
      const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [recordingWorkflow('plain', [])] } });
      const workflows = app.get(WorkflowService);
      const first = await workflows.submit('plain', { amount: 10 }, { idempotencyKey: 'charge-9' });
      const before = await bed.db.client.query('SELECT * FROM agent_tasks');

      for (const input of [{ amount: 11 }, { amount: 10, extra: true }, {}, undefined]) {
        const error = await workflows.submit('plain', input, { idempotencyKey: 'charge-9' }).catch((reason: unknown) => reason);
        expect(error).toBeInstanceOf(IdempotencyKeyConflictError);
        expect(error).toMatchObject({
          code: 'IDEMPOTENCY_KEY_CONFLICT',
          workflowName: 'plain',
          idempotencyKey: 'charge-9',
          taskId: first.id,
        });
        expect((error as Error).message).toContain(first.id);
      }
      await expect(workflows.submitWithResult('plain', { amount: 12 }, { idempotencyKey: 'charge-9' })).rejects.toBeInstanceOf(
        IdempotencyKeyConflictError,
      );
      expect((await bed.db.client.query('SELECT * FROM agent_tasks')).rows).toEqual(before.rows);
    });

    it('tells a created task from an existing one with submitWithResult', async () => {
      const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [recordingWorkflow('plain', [])] } });
      const workflows = app.get(WorkflowService);

      const first = await workflows.submitWithResult('plain', { n: 1 }, { idempotencyKey: 'k1' });
      const again = await workflows.submitWithResult('plain', { n: 1 }, { idempotencyKey: 'k1' });
      const withoutKey = await workflows.submitWithResult('plain', { n: 1 });
      const withoutKeyAgain = await workflows.submitWithResult('plain', { n: 1 });

      expect(first).toEqual({
        task: expect.objectContaining({ id: expect.stringMatching(UUID), status: TaskStatus.PENDING }),
        created: true,
      });
      expect(again.created).toBe(false);
      expect(again.task.id).toBe(first.task.id);
      expect(withoutKey.created).toBe(true);
      expect(withoutKeyAgain.created).toBe(true);
      expect(withoutKeyAgain.task.id).not.toBe(withoutKey.task.id);
      expect(await bed.rows.count('agent_tasks')).toBe(3);
    });

    it('creates exactly one task when 20 submits with the same key and input race', async () => {
      const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [recordingWorkflow('plain', [])] } });
      const workflows = app.get(WorkflowService);

      const results = await Promise.all(
        Array.from({ length: 20 }, () => workflows.submitWithResult('plain', { order: 7 }, { idempotencyKey: 'race' })),
      );

      expect(new Set(results.map(({ task }) => task.id)).size).toBe(1);
      expect(results.filter(({ created }) => created)).toHaveLength(1);
      expect(await bed.rows.count('agent_tasks')).toBe(1);
      expect(await bed.rows.count('agent_tasks', `idempotency_key = 'race'`)).toBe(1);
    });

    it('lets one of 20 racing submits with the same key and different inputs win, and refuses the 19 others', async () => {
      const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [recordingWorkflow('plain', [])] } });
      const workflows = app.get(WorkflowService);

      const outcomes = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) => workflows.submit('plain', { racer: i }, { idempotencyKey: 'race' })),
      );

      const won = outcomes.filter((outcome) => outcome.status === 'fulfilled');
      const refused = outcomes.filter((outcome) => outcome.status === 'rejected');
      expect(won).toHaveLength(1);
      expect(refused.map((outcome) => (outcome as PromiseRejectedResult).reason.code)).toEqual(Array(19).fill('IDEMPOTENCY_KEY_CONFLICT'));
      expect(await bed.rows.count('agent_tasks')).toBe(1);
    });

    it('lets different workflows use the same key independently', async () => {
      const app = await bed.start({
        duraflow: { ...SUBMIT_ONLY, workflows: [recordingWorkflow('invoice', []), recordingWorkflow('shipment', [])] },
      });
      const workflows = app.get(WorkflowService);

      const invoice = await workflows.submit('invoice', {}, { idempotencyKey: 'order-7' });
      const shipment = await workflows.submit('shipment', {}, { idempotencyKey: 'order-7' });
      const invoiceAgain = await workflows.submit('invoice', {}, { idempotencyKey: 'order-7' });
      const shipmentAgain = await workflows.submit('shipment', {}, { idempotencyKey: 'order-7' });

      expect(shipment.id).not.toBe(invoice.id);
      expect(invoiceAgain.id).toBe(invoice.id);
      expect(shipmentAgain.id).toBe(shipment.id);
      expect(await bed.rows.count('agent_tasks')).toBe(2);
    });

    it('returns the finished task for a key whose run already completed, without running it again', async () => {
      const runs: unknown[] = [];
      const app = await bed.start({ duraflow: { workflows: [recordingWorkflow('charge', runs)] } });
      const workflows = app.get(WorkflowService);
      const first = await workflows.submit('charge', { amount: 10 }, { idempotencyKey: 'charge-1' });
      await workflows.waitFor(first.id, { timeoutMs: 10_000 });

      const again = await workflows.submit('charge', { amount: 10 }, { idempotencyKey: 'charge-1' });
      const marker = await workflows.submit('charge', { marker: true });
      await workflows.waitFor(marker.id, { timeoutMs: 10_000 });

      expect(again.id).toBe(first.id);
      expect(again.status).toBe(TaskStatus.COMPLETED);
      expect(runs).toEqual([{ amount: 10 }, { marker: true }]);
    });
  });

  describe('transactional submit', () => {
    let app: TestingModule;
    let workflows: WorkflowService;
    let dataSource: DataSource;
    let runs: unknown[];

    beforeEach(async () => {
      runs = [];
      app = await bed.start({ duraflow: { workflows: [recordingWorkflow('fulfil', runs)] } });
      workflows = app.get(WorkflowService);
      dataSource = app.get(DataSource);
      await bed.db.client.query(`CREATE TABLE orders (id int PRIMARY KEY)`);
    });

    /** A later task, run to the end: the worker has claimed since the earlier submit. */
    async function runMarker(): Promise<void> {
      const marker = await workflows.submit('fulfil', { marker: true });
      expect((await workflows.waitFor(marker.id, { timeoutMs: 10_000 })).status).toBe(TaskStatus.COMPLETED);
    }

    it('leaves no task when the caller transaction rolls back, and the worker never runs it', async () => {
      const rollback = dataSource.transaction(async (manager) => {
        await manager.query(`INSERT INTO orders (id) VALUES (1)`);
        const task = await workflows.submit('fulfil', { orderId: 1 }, {}, manager);
        expect(task.status).toBe(TaskStatus.PENDING);
        const inside = await manager.query(`SELECT count(*)::int AS n FROM agent_tasks WHERE id = $1`, [task.id]);
        expect(inside[0].n).toBe(1);
        expect(await bed.rows.count('agent_tasks', 'id = $1', [task.id])).toBe(0);
        throw new Error('payment declined');
      });

      await expect(rollback).rejects.toThrow('payment declined');
      expect(await bed.rows.count('agent_tasks')).toBe(0);
      await runMarker();
      expect(runs).toEqual([{ marker: true }]);
      expect(await bed.rows.count('agent_tasks')).toBe(1);
    });

    it('creates the task when the caller transaction commits, and the worker runs it', async () => {
      let id = '';
      await dataSource.transaction(async (manager) => {
        await manager.query(`INSERT INTO orders (id) VALUES (2)`);
        id = (await workflows.submit('fulfil', { orderId: 2 }, {}, manager)).id;
        // Uncommitted: invisible to every other connection, the workers' included.
        expect(await bed.rows.count('agent_tasks', 'id = $1', [id])).toBe(0);
      });

      const done = await workflows.waitFor(id, { timeoutMs: 10_000 });
      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(done.output).toEqual({ echo: { orderId: 2 } });
      expect(runs).toEqual([{ orderId: 2 }]);
    });

    it('joins the transaction passed as submit({ manager }), for rollback and commit alike', async () => {
      await expect(
        dataSource.transaction(async (manager) => {
          await workflows.submit('fulfil', { orderId: 3 }, { manager, idempotencyKey: 'order-3' });
          throw new Error('abort');
        }),
      ).rejects.toThrow('abort');
      expect(await bed.rows.count('agent_tasks')).toBe(0);

      const committed = await dataSource.transaction((manager) =>
        workflows.submit('fulfil', { orderId: 4 }, { manager, idempotencyKey: 'order-3' }),
      );

      // The rolled-back submit did not keep the key either.
      expect(committed.input).toEqual({ orderId: 4 });
      expect((await workflows.waitFor(committed.id, { timeoutMs: 10_000 })).status).toBe(TaskStatus.COMPLETED);
      await runMarker();
      expect(runs).toEqual([{ orderId: 4 }, { marker: true }]);
    });
  });

  describe('get, getSteps and list', () => {
    it('gets a task and its steps in completion order; an unknown id gives null and no steps', async () => {
      const twoSteps = workflow('two-steps', async (ctx) => {
        const a = await ctx.step.run('first', () => 1);
        const b = await ctx.step.run('second', () => a + 1);
        return { b };
      });
      const app = await bed.start({ duraflow: { workflows: [twoSteps] } });
      const workflows = app.get(WorkflowService);
      const task = await workflows.submit('two-steps', {});
      await workflows.waitFor(task.id, { timeoutMs: 10_000 });

      const found = await workflows.get(task.id);
      const steps = await workflows.getSteps(task.id);

      expect(found).toMatchObject({ id: task.id, status: TaskStatus.COMPLETED, output: { b: 2 } });
      expect(steps.map((step) => [step.stepKey, step.status, step.output])).toEqual([
        ['first', 'completed', 1],
        ['second', 'completed', 2],
      ]);
      expect(await workflows.get(randomUUID())).toBeNull();
      expect(await workflows.get('not-a-uuid')).toBeNull();
      expect(await workflows.getSteps(randomUUID())).toEqual([]);
    });

    it('lists newest first and filters by status and by workflow name', async () => {
      const app = await bed.start({
        duraflow: { ...SUBMIT_ONLY, workflows: [recordingWorkflow('alpha', []), recordingWorkflow('beta', [])] },
      });
      const workflows = app.get(WorkflowService);
      const a1 = await workflows.submit('alpha', {});
      const b1 = await workflows.submit('beta', {});
      const a2 = await workflows.submit('alpha', {});
      const b2 = await workflows.submit('beta', {});
      const a3 = await workflows.submit('alpha', {});
      await workflows.cancel(a2.id);
      const ids = async (options: Parameters<WorkflowService['list']>[0]) => (await workflows.list(options)).items.map((t) => t.id);

      expect(await ids({})).toEqual([a3.id, b2.id, a2.id, b1.id, a1.id]);
      expect(await ids({ status: TaskStatus.CANCELLED })).toEqual([a2.id]);
      expect(await ids({ status: 'pending' })).toEqual([a3.id, b2.id, b1.id, a1.id]);
      expect(await ids({ workflowName: 'beta' })).toEqual([b2.id, b1.id]);
      expect(await ids({ workflowName: 'alpha', status: 'pending' })).toEqual([a3.id, a1.id]);
      expect(await ids({ workflowName: 'gamma' })).toEqual([]);
      expect((await workflows.list({ workflowName: 'beta' })).nextCursor).toBeNull();
    });

    it('pages through 25 tasks 10 at a time with no duplicates or gaps, even when created_at ties', async () => {
      const app = await bed.start({
        duraflow: { ...SUBMIT_ONLY, workflows: [recordingWorkflow('alpha', []), recordingWorkflow('beta', [])] },
      });
      const workflows = app.get(WorkflowService);
      // One transaction: now() is the same for all ten, so only the id orders them.
      await app.get(DataSource).transaction(async (manager) => {
        for (let i = 0; i < 10; i++) await workflows.submit('alpha', { i }, { manager });
      });
      await Promise.all(Array.from({ length: 15 }, (_, i) => workflows.submit(i % 3 ? 'alpha' : 'beta', { i })));
      const { rows: ties } = await bed.db.client.query(
        `SELECT count(*)::int AS n FROM agent_tasks GROUP BY created_at ORDER BY n DESC LIMIT 1`,
      );
      expect(ties[0].n).toBeGreaterThanOrEqual(10);

      const expected = async (where: string) =>
        (await bed.db.client.query(`SELECT id FROM agent_tasks WHERE ${where} ORDER BY created_at DESC, id DESC`)).rows.map(
          (row) => row.id,
        );
      const pageThrough = async (options: { workflowName?: string }) => {
        const pages: string[][] = [];
        let cursor: string | undefined;
        for (;;) {
          const page = await workflows.list({ ...options, limit: 10, cursor });
          pages.push(page.items.map((task) => task.id));
          if (!page.nextCursor) return pages;
          cursor = page.nextCursor;
          if (pages.length > 10) throw new Error('list never returned a null nextCursor');
        }
      };

      const pages = await pageThrough({});
      expect(pages.map((page) => page.length)).toEqual([10, 10, 5]);
      expect(new Set(pages.flat()).size).toBe(25);
      expect(pages.flat()).toEqual(await expected('TRUE'));

      const alphaPages = await pageThrough({ workflowName: 'alpha' });
      expect(alphaPages.map((page) => page.length)).toEqual([10, 10]);
      expect(alphaPages.flat()).toEqual(await expected(`workflow_name = 'alpha'`));
    });

    it('rejects a cursor it did not produce with InvalidCursorError', async () => {
      const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [recordingWorkflow('alpha', [])] } });
      const workflows = app.get(WorkflowService);
      await workflows.submit('alpha', {});
      await workflows.submit('alpha', {});
      const { nextCursor } = await workflows.list({ limit: 1 });
      expect(nextCursor).toEqual(expect.any(String));

      await expect(workflows.list({ cursor: 'garbage' })).rejects.toBeInstanceOf(InvalidCursorError);
      await expect(workflows.list({ cursor: Buffer.from('123:not-a-uuid').toString('base64url') })).rejects.toBeInstanceOf(
        InvalidCursorError,
      );
      await expect(workflows.list({ cursor: `${nextCursor}x` })).rejects.toBeInstanceOf(InvalidCursorError);
      expect((await workflows.list({ cursor: nextCursor! })).items).toHaveLength(1);
    });

    it('range-checks the cursor: a tampered one whose time overflows gets InvalidCursorError, not a database error', async () => {
      const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [recordingWorkflow('alpha', [])] } });
      const workflows = app.get(WorkflowService);
      const saga = app.get(SagaService);
      const tampered = (micros: string) => Buffer.from(`${micros}:${randomUUID()}`).toString('base64url');

      for (const micros of [
        '9999999999999999999',
        '-9999999999999999999',
        '9223372036854775807',
        '9007199254740992',
        '-9007199254740992',
      ]) {
        await expect(workflows.list({ cursor: tampered(micros) })).rejects.toMatchObject({
          name: 'InvalidCursorError',
          code: 'INVALID_CURSOR',
        });
        await expect(saga.listDeadLetters({ cursor: tampered(micros) })).rejects.toBeInstanceOf(InvalidCursorError);
      }
      // The edges of the range are a position like any other: everything is older than the newest one.
      const task = await workflows.submit('alpha', {});
      expect((await workflows.list({ cursor: tampered('9007199254740991') })).items.map((t) => t.id)).toEqual([task.id]);
      expect((await workflows.list({ cursor: tampered('-9007199254740991') })).items).toEqual([]);
      expect((await saga.listDeadLetters({ cursor: tampered('9007199254740991') })).items).toEqual([]);
    });

    it('rejects a limit outside 1..1000 or an unknown status with InvalidListOptionsError', async () => {
      const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [recordingWorkflow('alpha', [])] } });
      const workflows = app.get(WorkflowService);

      for (const limit of [0, -1, 1001, 2.5, Number.NaN]) {
        await expect(workflows.list({ limit })).rejects.toBeInstanceOf(InvalidListOptionsError);
      }
      await expect(workflows.list({ status: 'done' as TaskStatus })).rejects.toBeInstanceOf(InvalidListOptionsError);
      expect((await workflows.list({ limit: 1000 })).items).toEqual([]);
    });
  });

  describe('cancel', () => {
    it('cancels a pending task, which the running worker then never runs', async () => {
      const barrier = new StepBarrier();
      const runs: unknown[] = [];
      const blocker = workflow('blocker', async (ctx) => {
        await ctx.step.run('block', () => barrier.pass());
        return null;
      });
      const app = await bed.start({
        duraflow: { worker: { concurrency: 1 }, workflows: [blocker, recordingWorkflow('errand', runs)] },
      });
      const workflows = app.get(WorkflowService);
      try {
        await workflows.submit('blocker', {});
        await eventually('the only worker slot is busy', () => barrier.waiting === 1);
        const target = await workflows.submit('errand', { which: 'cancelled' }, { priority: 10 });
        const later = await workflows.submit('errand', { which: 'later' });

        const cancelled = await workflows.cancel(target.id);
        expect(cancelled).toMatchObject({ id: target.id, status: TaskStatus.CANCELLED });
        expect(cancelled.completedAt).toBeInstanceOf(Date);

        barrier.open();
        expect((await workflows.waitFor(later.id, { timeoutMs: 10_000 })).status).toBe(TaskStatus.COMPLETED);
        const row = await bed.rows.task(target.id);
        expect(row.status).toBe('cancelled');
        expect(row.started_at).toBeNull();
        expect(row.worker_id).toBeNull();
        expect(runs).toEqual([{ which: 'later' }]);
      } finally {
        barrier.open();
      }
    });

    it('cancels a running task: its step signal aborts and the task stays cancelled', async () => {
      const aborted: unknown[] = [];
      const after: string[] = [];
      const hanging = workflow('hanging', async (ctx) => {
        await ctx.step.run(
          'wait-for-abort',
          ({ signal }) =>
            new Promise((_, reject) =>
              signal.addEventListener('abort', () => {
                aborted.push(signal.reason);
                reject(signal.reason);
              }),
            ),
        );
        after.push('a step after the cancelled one');
        await ctx.step.run('never', () => after.push('never'));
      });
      const app = await bed.start({ duraflow: { workflows: [hanging] } });
      const workflows = app.get(WorkflowService);
      const worker = app.get(WorkerService);
      const task = await workflows.submit('hanging', {});
      await eventually('the task is running', async () => (await bed.rows.task(task.id)).status === 'running');

      const cancelled = await workflows.cancel(task.id);

      expect(cancelled.status).toBe(TaskStatus.CANCELLED);
      await eventually('the worker stopped the run', () => aborted.length === 1 && worker.stats().stopped === 1);
      expect(worker.stats()).toMatchObject({ running: 0, completed: 0, failed: 0 });
      expect(after).toEqual([]);
      expect((await workflows.waitFor(task.id, { timeoutMs: 1_000 })).status).toBe(TaskStatus.CANCELLED);
      const steps = await workflows.getSteps(task.id);
      expect(steps.filter((step) => step.status === 'completed')).toEqual([]);
    });

    it('refuses to cancel a finished task with TaskAlreadyFinishedError and leaves it as it was', async () => {
      const app = await bed.start({ duraflow: { workflows: [recordingWorkflow('errand', [])] } });
      const workflows = app.get(WorkflowService);
      const done = await workflows.submit('errand', {});
      await workflows.waitFor(done.id, { timeoutMs: 10_000 });
      const scheduled = await workflows.submit('errand', {}, { scheduledAt: new Date(Date.now() + 3_600_000) });
      await workflows.cancel(scheduled.id);

      const completedError = await workflows.cancel(done.id).catch((error: unknown) => error);
      const cancelledError = await workflows.cancel(scheduled.id).catch((error: unknown) => error);

      expect(completedError).toBeInstanceOf(TaskAlreadyFinishedError);
      expect(completedError).toMatchObject({ taskId: done.id, status: 'completed' });
      expect(cancelledError).toBeInstanceOf(TaskAlreadyFinishedError);
      expect(cancelledError).toMatchObject({ taskId: scheduled.id, status: 'cancelled' });
      expect((await bed.rows.task(done.id)).status).toBe('completed');
    });

    it('throws TaskNotFoundError for an unknown id', async () => {
      const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [recordingWorkflow('errand', [])] } });
      const workflows = app.get(WorkflowService);

      await expect(workflows.cancel(randomUUID())).rejects.toBeInstanceOf(TaskNotFoundError);
      await expect(workflows.cancel('not-a-uuid')).rejects.toBeInstanceOf(TaskNotFoundError);
    });
  });

  describe('waitFor', () => {
    const outcomes = workflow('outcome', async (ctx: WorkflowContext<{ fail: boolean }>) => {
      await ctx.step.run('decide', () => {
        if (ctx.input.fail) throw new Error('card declined');
        return 'ok';
      });
      return { paid: true };
    });

    it('resolves with the task once it completed', async () => {
      const app = await bed.start({ duraflow: { workflows: [outcomes] } });
      const workflows = app.get(WorkflowService);
      const task = await workflows.submit('outcome', { fail: false });

      const done = await workflows.waitFor(task.id, { timeoutMs: 10_000 });

      expect(done).toMatchObject({ id: task.id, status: TaskStatus.COMPLETED, output: { paid: true } });
      expect(done.completedAt).toBeInstanceOf(Date);
    });

    it('resolves with the task once it failed', async () => {
      const app = await bed.start({ duraflow: { workflows: [outcomes] } });
      const workflows = app.get(WorkflowService);
      const task = await workflows.submit('outcome', { fail: true });

      const done = await workflows.waitFor(task.id, { timeoutMs: 10_000 });

      expect(done.status).toBe(TaskStatus.FAILED);
      expect(done.error).toMatchObject({ message: 'card declined', stepKey: 'decide' });
    });

    it('rejects with WaitForTimeoutError when the task does not finish within timeoutMs', async () => {
      const barrier = new StepBarrier();
      const blocker = workflow('stuck', async (ctx) => {
        await ctx.step.run('block', () => barrier.pass());
        return null;
      });
      const app = await bed.start({ duraflow: { workflows: [blocker] } });
      const workflows = app.get(WorkflowService);
      try {
        const running = await workflows.submit('stuck', {});
        await eventually('the step is blocked', () => barrier.waiting === 1);
        const waiting = await workflows.submit('stuck', {}, { scheduledAt: new Date(Date.now() + 3_600_000) });

        const runningError = await workflows.waitFor(running.id, { timeoutMs: 300 }).catch((error: unknown) => error);
        const pendingError = await workflows.waitFor(waiting.id, { timeoutMs: 300 }).catch((error: unknown) => error);

        expect(runningError).toBeInstanceOf(WaitForTimeoutError);
        expect(runningError).toMatchObject({ taskId: running.id, timeoutMs: 300, lastStatus: 'running' });
        expect(pendingError).toBeInstanceOf(WaitForTimeoutError);
        expect(pendingError).toMatchObject({ taskId: waiting.id, lastStatus: 'pending' });
      } finally {
        barrier.open();
      }
    });

    it('rejects with TaskNotFoundError for an unknown id', async () => {
      const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [outcomes] } });

      await expect(app.get(WorkflowService).waitFor(randomUUID(), { timeoutMs: 1_000 })).rejects.toBeInstanceOf(TaskNotFoundError);
    });

    it.each([
      ['timeoutMs', Number.NaN],
      ['timeoutMs', Number.POSITIVE_INFINITY],
      ['timeoutMs', -1],
      ['timeoutMs', 2.5],
      ['timeoutMs', 2 ** 31],
      ['timeoutMs', '1000'],
      ['pollIntervalMs', Number.NaN],
      ['pollIntervalMs', Number.POSITIVE_INFINITY],
      ['pollIntervalMs', 0],
      ['pollIntervalMs', 9],
      ['pollIntervalMs', 1e12],
    ])('rejects %s = %p with InvalidWaitOptionsError before reading anything', async (option, value) => {
      const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [outcomes] } });
      const workflows = app.get(WorkflowService);
      const task = await workflows.submit('outcome', { fail: false }, { scheduledAt: new Date(Date.now() + 3_600_000) });
      const reads = jest.spyOn(app.get(TaskStore), 'findTask');
      const listeners = finishedListeners(app);

      const error = await workflows.waitFor(task.id, { [option]: value }).catch((e: unknown) => e);

      expect(error).toBeInstanceOf(InvalidWaitOptionsError);
      expect(error).toMatchObject({ code: 'INVALID_WAIT_OPTIONS', option, message: expect.stringContaining(`"${option}"`) });
      expect(reads).not.toHaveBeenCalled();
      expect(finishedListeners(app)).toBe(listeners);
    });

    it('accepts the edges of the ranges: timeoutMs 0 looks once, pollIntervalMs 10 and 2^31-1 wait as asked', async () => {
      const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [outcomes] } });
      const workflows = app.get(WorkflowService);
      const task = await workflows.submit('outcome', { fail: false }, { scheduledAt: new Date(Date.now() + 3_600_000) });
      const reads = jest.spyOn(app.get(TaskStore), 'findTask');

      await expect(workflows.waitFor(task.id, { timeoutMs: 0 })).rejects.toMatchObject({ code: 'WAIT_TIMEOUT', timeoutMs: 0 });
      expect(reads).toHaveBeenCalledTimes(1);
      for (const pollIntervalMs of [10, 2 ** 31 - 1]) {
        await expect(workflows.waitFor(task.id, { timeoutMs: 50, pollIntervalMs })).rejects.toBeInstanceOf(WaitForTimeoutError);
      }
    });

    it('removes its listener however it ends: finished, timed out, not found, or failed to read', async () => {
      const app = await bed.start({ duraflow: { workflows: [outcomes] } });
      const workflows = app.get(WorkflowService);
      const done = await workflows.submit('outcome', { fail: false });
      const waiting = await workflows.submit('outcome', { fail: false }, { scheduledAt: new Date(Date.now() + 3_600_000) });
      const listeners = finishedListeners(app); // the worker's own

      await expect(workflows.waitFor(done.id, { timeoutMs: 10_000 })).resolves.toMatchObject({ status: TaskStatus.COMPLETED });
      await expect(workflows.waitFor(waiting.id, { timeoutMs: 100 })).rejects.toBeInstanceOf(WaitForTimeoutError);
      await expect(workflows.waitFor(randomUUID(), { timeoutMs: 100 })).rejects.toBeInstanceOf(TaskNotFoundError);
      expect(finishedListeners(app)).toBe(listeners);
      const pending = workflows.waitFor(waiting.id, { timeoutMs: 10_000, pollIntervalMs: 20 });
      expect(finishedListeners(app)).toBe(listeners + 1);
      await bed.db.client.query(`ALTER TABLE agent_tasks RENAME TO agent_tasks_away`); // its next read fails
      try {
        await expect(pending).rejects.toThrow(/agent_tasks/);
      } finally {
        await bed.db.client.query(`ALTER TABLE agent_tasks_away RENAME TO agent_tasks`);
      }

      expect(finishedListeners(app)).toBe(listeners);
    });
  });
});
