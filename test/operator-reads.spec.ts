import { TestingModule } from '@nestjs/testing';
import { InvalidListOptionsError, SagaService, TaskStatus, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { useTestBed } from './support/test-bed';
import { FAST_BACKOFF } from './fixtures/saga/workflows';

/** The reads an operator's view needs: counts, a time range, step previews, one step, progress. */

const BIG = 'x'.repeat(300_000);
let undoFailures = 0;

const bigSteps = workflow('big-steps', async (ctx: WorkflowContext) => {
  await ctx.step.run('small', () => ({ ok: true }));
  await ctx.step.run('large', () => ({ blob: BIG }));
  await ctx.step.run('nothing', () => undefined);
  return { done: true };
});

/** Books, then fails; the undo of `book` fails for good the first time, so it lands in the dead-letter queue. */
const failing = workflow(
  'failing',
  async (ctx: WorkflowContext) => {
    await ctx.step.run('book', () => ({ reference: 'R-1' }));
    await ctx.step.run(
      'pay',
      () => {
        throw new Error('card declined');
      },
      { retries: 1, backoff: FAST_BACKOFF },
    );
  },
  {
    compensations: {
      book: () => {
        if (undoFailures-- > 0) throw new Error('vendor down');
      },
    },
    compensation: { retries: 0 },
  },
);

const bed = useTestBed();
let app: TestingModule;
let workflows: WorkflowService;

beforeAll(async () => {
  app = await bed.start({ duraflow: { workflows: [bigSteps, failing] } });
  workflows = app.get(WorkflowService);
});

/** A task row of `workflowName` in `status`, created at `createdAt`, written past the library. */
async function seedTask(workflowName: string, status: TaskStatus, createdAt: string): Promise<string> {
  const { rows } = await bed.db.client.query(
    `INSERT INTO agent_tasks (workflow_name, status, created_at, scheduled_at) VALUES ($1, $2, $3, now() + interval '1 hour') RETURNING id`,
    [workflowName, status, createdAt],
  );
  return rows[0].id;
}

describe('countByStatus and list by time range', () => {
  let ids: Record<string, string>;

  beforeAll(async () => {
    ids = {
      oldDone: await seedTask('report', TaskStatus.COMPLETED, '2020-01-01T10:00:00Z'),
      midFailed: await seedTask('report', TaskStatus.FAILED, '2020-01-02T10:00:00Z'),
      midOther: await seedTask('export', TaskStatus.COMPLETED, '2020-01-02T11:00:00Z'),
      newPending: await seedTask('report', TaskStatus.PENDING, '2020-01-03T10:00:00Z'),
    };
  });

  it('counts every status, zeros included, narrowed by workflow and by a half-open time range', async () => {
    const range = { createdAfter: '2020-01-01T00:00:00Z', createdBefore: '2020-01-04T00:00:00Z' };
    expect(await workflows.countByStatus(range)).toEqual({
      pending: 1,
      running: 0,
      completed: 2,
      failed: 1,
      cancelled: 0,
      rolled_back: 0,
      partial_rollback: 0,
    });
    expect(await workflows.countByStatus({ ...range, workflowName: 'report' })).toMatchObject({ completed: 1, failed: 1, pending: 1 });
    // From inclusive, to exclusive: the task created exactly at createdBefore is left out.
    expect(
      await workflows.countByStatus({
        workflowName: 'report',
        createdAfter: new Date('2020-01-02T10:00:00Z'),
        createdBefore: '2020-01-03T10:00:00Z',
      }),
    ).toMatchObject({ completed: 0, failed: 1, pending: 0 });
  });

  it('lists only the tasks created in the range, newest first, with the other filters', async () => {
    const page = await workflows.list({ createdAfter: '2020-01-02T00:00:00Z', createdBefore: '2020-01-03T00:00:00Z' });
    expect(page.items.map((task) => task.id)).toEqual([ids.midOther, ids.midFailed]);
    const reports = await workflows.list({
      workflowName: 'report',
      createdAfter: '2020-01-02T00:00:00Z',
      createdBefore: '2020-01-05T00:00:00Z',
    });
    expect(reports.items.map((task) => task.id)).toEqual([ids.newPending, ids.midFailed]);
    const paged = await workflows.list({ createdBefore: '2020-01-05T00:00:00Z', createdAfter: '2019-12-31T00:00:00Z', limit: 3 });
    const rest = await workflows.list({
      createdBefore: '2020-01-05T00:00:00Z',
      createdAfter: '2019-12-31T00:00:00Z',
      limit: 3,
      cursor: paged.nextCursor!,
    });
    expect([...paged.items, ...rest.items].map((task) => task.id)).toEqual([ids.newPending, ids.midOther, ids.midFailed, ids.oldDone]);
  });

  it.each([
    ['createdAfter', 'yesterday'],
    ['createdBefore', '-010000-01-01T00:00:00Z'],
    ['createdAfter', 42],
  ])('refuses %s = %p with InvalidListOptionsError', async (option, value) => {
    await expect(workflows.list({ [option]: value } as never)).rejects.toThrow(InvalidListOptionsError);
    await expect(workflows.countByStatus({ [option]: value } as never)).rejects.toMatchObject({ code: 'INVALID_LIST_OPTIONS', option });
  });
});

describe('getStepSummaries and getStep', () => {
  let taskId: string;

  beforeAll(async () => {
    taskId = (await workflows.submit('big-steps', {})).id;
    expect((await workflows.waitFor(taskId)).status).toBe(TaskStatus.COMPLETED);
  });

  it('cuts each output to previewChars in the database and tells its full size', async () => {
    const summaries = await workflows.getStepSummaries(taskId, { previewChars: 100 });
    expect(summaries.map((step) => [step.stepKey, step.status, step.attempt])).toEqual([
      ['small', 'completed', 1],
      ['large', 'completed', 1],
      ['nothing', 'completed', 1],
    ]);
    const [small, large, nothing] = summaries;
    expect(small.output).toEqual({ text: '{\n    "ok": true\n}', truncated: false, bytes: Buffer.byteLength('{"ok": true}') });
    expect(large.output!.truncated).toBe(true);
    expect(large.output!.text).toHaveLength(100);
    expect(large.output!.text.startsWith('{\n    "blob": "xxx')).toBe(true);
    expect(large.output!.bytes).toBe(Buffer.byteLength(JSON.stringify({ blob: BIG })) + 1); // jsonb's text puts a space after ':'
    expect(nothing.output).toBeNull();
    expect(small.input).toBeNull();
    expect(small).toMatchObject({ taskId, completionSeq: 1, compensationFn: null, compensatedAt: null, error: null });
    expect(small.startedAt).toBeInstanceOf(Date);
    expect(small.completedAt!.getTime()).toBeGreaterThanOrEqual(small.startedAt!.getTime());
  });

  it('keeps 2,048 characters by default and refuses a previewChars out of range', async () => {
    const [, large] = await workflows.getStepSummaries(taskId);
    expect(large.output!.text).toHaveLength(2048);
    for (const previewChars of [0, 1.5, 1024 * 1024 + 1]) {
      await expect(workflows.getStepSummaries(taskId, { previewChars })).rejects.toMatchObject({
        code: 'INVALID_LIST_OPTIONS',
        option: 'previewChars',
      });
    }
    expect(await workflows.getStepSummaries('not-a-uuid')).toEqual([]);
  });

  it('gets one step by its key with its whole output; null for an unknown key or task', async () => {
    const large = await workflows.getStep(taskId, 'large');
    expect(large).toMatchObject({ taskId, stepKey: 'large', status: 'completed', output: { blob: BIG } });
    expect(await workflows.getStep(taskId, 'no-such-step')).toBeNull();
    expect(await workflows.getStep('00000000-0000-4000-8000-000000000000', 'large')).toBeNull();
    expect(await workflows.getStep('not-a-uuid', 'large')).toBeNull();
  });
});

describe('getProgress', () => {
  it('follows a run through its failure, rollback, dead letter and retry; null for an unknown task', async () => {
    undoFailures = 1;
    const task = await workflows.submit('failing', {}, { scheduledAt: new Date(Date.now() + 3_600_000) });
    expect(await workflows.getProgress(task.id)).toMatchObject({
      status: 'pending',
      retryCount: 0,
      steps: { total: 0, completed: 0, failed: 0, compensated: 0, attempts: 0 },
      deadLetters: { open: 0, retries: 0 },
    });

    await bed.db.client.query(`UPDATE agent_tasks SET scheduled_at = now() WHERE id = $1`, [task.id]); // the worker polls every 50 ms
    expect((await workflows.waitFor(task.id)).status).toBe(TaskStatus.PARTIAL_ROLLBACK);
    const failed = await workflows.getProgress(task.id);
    expect(failed).toMatchObject({
      status: 'partial_rollback',
      steps: { total: 2, completed: 1, failed: 1, compensated: 0, attempts: 3 },
      deadLetters: { open: 1, retries: 0 },
    });

    const [entry] = (await app.get(SagaService).listDeadLetters({ taskId: task.id })).items;
    expect((await app.get(SagaService).retryDeadLetter(entry.id)).outcome).toBe('compensated');
    const resolved = await workflows.getProgress(task.id);
    expect(resolved).toMatchObject({ status: 'rolled_back', steps: { compensated: 1 }, deadLetters: { open: 0 } });
    expect(resolved!.updatedAt.getTime()).toBeGreaterThanOrEqual(failed!.updatedAt.getTime());

    expect(await workflows.getProgress('00000000-0000-4000-8000-000000000000')).toBeNull();
    expect(await workflows.getProgress('not-a-uuid')).toBeNull();
  });
});
