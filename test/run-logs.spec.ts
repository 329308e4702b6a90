import { TestingModule } from '@nestjs/testing';
import {
  DuraflowModuleOptions,
  InvalidDuraflowOptionsError,
  InvalidListOptionsError,
  TaskStatus,
  WorkflowContext,
  WorkflowService,
  workflow,
} from '@duraflow/nestjs';
import { useTestBed } from './support/test-bed';
import { resolveDuraflowOptions } from '../libs/duraflow/src/config/resolved-options';
import { DROPPED_LINES_MESSAGE } from '../libs/duraflow/src/persistence/run-log.store';

/*
 * ctx.log: lines of the workflow's body and of its steps kept with the run (task_logs), written
 * with the run's checkpoints, waits and end; read back in order with workflows.getLogs.
 */

const bed = useTestBed({ databasePerTest: true });

const charge = workflow('logs-charge', async (ctx: WorkflowContext<{ amount: number }>) => {
  ctx.log.info('start', { amount: ctx.input.amount });
  await ctx.step.run(
    'charge',
    ({ attempt }) => {
      ctx.log.warn('charging', { attempt });
      if (attempt === 1) throw new Error('psp busy');
      return 'ok';
    },
    { retries: 1, backoff: { initialDelayMs: 1, maxDelayMs: 1 } },
  );
  ctx.log.debug('between');
  await ctx.sleep('nap', 20);
  ctx.log.error('after the nap');
  await ctx.step.run('receipt', () => ctx.log.info('receipt sent'));
  return 'done';
});

const chatty = workflow('logs-chatty', async (ctx: WorkflowContext<{ lines: number }>) => {
  await ctx.step.run('talk', () => {
    for (let i = 1; i <= ctx.input.lines; i++) ctx.log.info(`line ${i}`);
  });
});

const sized = workflow('logs-sized', async (ctx: WorkflowContext) => {
  await ctx.step.run('a', () => {
    ctx.log.info('a long message', { blob: 'x'.repeat(100) });
    ctx.log.info('a2', { small: 1 });
    for (const n of [3, 4]) ctx.log.info(`a${n}`);
  });
  await ctx.step.run('b', () => ['b1', 'b2'].forEach((message) => ctx.log.info(message)));
});

function startApp(duraflow: DuraflowModuleOptions = {}): Promise<TestingModule> {
  return bed.start({ duraflow: { ...duraflow, workflows: [charge, chatty, sized], worker: { shutdownTimeoutMs: 100 } } });
}

async function logCount(taskId: string): Promise<number> {
  const { rows } = await bed.db.client.query<{ n: number }>(`SELECT count(*)::int AS n FROM task_logs WHERE task_id = $1`, [taskId]);
  return rows[0].n;
}

describe('run logs', () => {
  it('keeps the lines of the body and of the steps in order, with step key and attempt, once across a suspension and replay', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('logs-charge', { amount: 42 });
    expect((await workflows.waitFor(task.id, { timeoutMs: 20_000 })).status).toBe(TaskStatus.COMPLETED);

    const { items, nextAfterSeq } = await workflows.getLogs(task.id);

    expect(nextAfterSeq).toBeNull();
    expect(
      items.map(({ seq, level, message, metadata, stepKey, attempt }) => ({ seq, level, message, metadata, stepKey, attempt })),
    ).toEqual([
      { seq: 1, level: 'info', message: 'start', metadata: { amount: 42 }, stepKey: null, attempt: null },
      { seq: 2, level: 'warn', message: 'charging', metadata: { attempt: 1 }, stepKey: 'charge', attempt: 1 },
      { seq: 3, level: 'warn', message: 'charging', metadata: { attempt: 2 }, stepKey: 'charge', attempt: 2 },
      { seq: 4, level: 'debug', message: 'between', metadata: null, stepKey: null, attempt: null },
      { seq: 5, level: 'error', message: 'after the nap', metadata: null, stepKey: null, attempt: null },
      { seq: 6, level: 'info', message: 'receipt sent', metadata: null, stepKey: 'receipt', attempt: 1 },
    ]);
    expect(items.every((item) => item.at instanceof Date)).toBe(true);
  });

  it('pages with afterSeq and limit, and refuses a bad afterSeq', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('logs-chatty', { lines: 5 });
    await workflows.waitFor(task.id, { timeoutMs: 20_000 });

    const first = await workflows.getLogs(task.id, { limit: 2 });
    const second = await workflows.getLogs(task.id, { afterSeq: first.nextAfterSeq!, limit: 2 });
    const last = await workflows.getLogs(task.id, { afterSeq: second.nextAfterSeq!, limit: 2 });

    expect(first.items.map((line) => line.message)).toEqual(['line 1', 'line 2']);
    expect(first.nextAfterSeq).toBe(2);
    expect(second.items.map((line) => line.message)).toEqual(['line 3', 'line 4']);
    expect(last).toMatchObject({ items: [{ seq: 5, message: 'line 5' }], nextAfterSeq: null });
    await expect(workflows.getLogs(task.id, { afterSeq: -1 })).rejects.toBeInstanceOf(InvalidListOptionsError);
    expect(await workflows.getLogs('not-a-task')).toEqual({ items: [], nextAfterSeq: null });
  });

  it('keeps the oldest 1000 lines of a task and counts those dropped in one last row', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('logs-chatty', { lines: 1_030 });
    await workflows.waitFor(task.id, { timeoutMs: 20_000 });

    expect(await logCount(task.id)).toBe(1_001);
    const tail = await workflows.getLogs(task.id, { afterSeq: 999 });
    expect(tail.items).toMatchObject([
      { seq: 1000, message: 'line 1000' },
      { seq: 1001, level: 'warn', metadata: { dropped: 30 }, stepKey: null },
    ]);
  });

  it('takes its bounds from the logs option: message cut, metadata replaced, the dropped count summed across checkpoints', async () => {
    const app = await startApp({ logs: { maxPerTask: 3, maxMessageChars: 6, maxMetadataBytes: 20 } });
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('logs-sized');
    await workflows.waitFor(task.id, { timeoutMs: 20_000 });

    const { items } = await workflows.getLogs(task.id);

    expect(items.map(({ seq, message, metadata, stepKey }) => ({ seq, message, metadata, stepKey }))).toEqual([
      { seq: 1, message: 'a long…', metadata: { truncated: true, bytes: 111 }, stepKey: 'a' },
      { seq: 2, message: 'a2', metadata: { small: 1 }, stepKey: 'a' },
      { seq: 3, message: 'a3', metadata: null, stepKey: 'a' },
      { seq: 4, message: DROPPED_LINES_MESSAGE, metadata: { dropped: 3 }, stepKey: null },
    ]);
    expect(() => resolveDuraflowOptions({ logs: { maxPerTask: 0 } })).toThrow(InvalidDuraflowOptionsError);
  });

  it('deletes a task’s lines with the task', async () => {
    const app = await startApp();
    const workflows = app.get(WorkflowService);
    const gone = await workflows.submit('logs-chatty', { lines: 3 });
    const kept = await workflows.submit('logs-chatty', { lines: 2 });
    await workflows.waitFor(gone.id, { timeoutMs: 20_000 });
    await workflows.waitFor(kept.id, { timeoutMs: 20_000 });

    await bed.db.client.query(`DELETE FROM agent_tasks WHERE id = $1`, [gone.id]);

    expect(await logCount(gone.id)).toBe(0);
    expect(await logCount(kept.id)).toBe(2);
  });
});
