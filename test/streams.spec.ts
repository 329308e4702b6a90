import {
  aesGcmCodec,
  InvalidListOptionsError,
  StreamChunk,
  TaskNotFoundError,
  TaskStatus,
  WorkflowContext,
  WorkflowService,
  workflow,
} from '@duraflow/nestjs';
import { randomBytes, randomUUID } from 'node:crypto';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * ctx.writeStream / ctx.closeStream / workflows.readStream: chunks numbered per (task, key),
 * read once each, in order, from any offset, live while the run writes, ending at the close.
 */

const bed = useTestBed({ databasePerTest: true });

const gates = new Map<string, () => void>();
const gate = (taskId: string) => new Promise<void>((resolve) => gates.set(taskId, resolve));

const tokens = workflow('streams-tokens', async (ctx: WorkflowContext) => {
  await ctx.writeStream('tokens', 'body 1');
  await ctx.step.run('words', async () => {
    for (const word of ['in', 'the', 'step']) await ctx.writeStream('tokens', word);
    return 'ok';
  });
  await ctx.writeStream('tokens', { end: true });
  await ctx.closeStream('tokens');
});

const live = workflow('streams-live', async (ctx: WorkflowContext) => {
  await ctx.writeStream('tokens', 'first');
  await gate(ctx.runId);
  await ctx.writeStream('tokens', 'second');
  await ctx.closeStream('tokens');
});

/** The step's first attempt writes 'x' and fails; the second writes 'y'. */
const retried = workflow('streams-retried', async (ctx: WorkflowContext) => {
  await ctx.step.run(
    'flaky',
    async ({ attempt }) => {
      await ctx.writeStream('tokens', attempt === 1 ? 'x' : 'y');
      if (attempt === 1) throw new Error('flaky');
    },
    { retries: 1, backoff: { initialDelayMs: 1, maxDelayMs: 1 } },
  );
});

/** A body chunk, a sleep (the run resumes by replaying its body), another chunk; no close: the task's end ends the stream. */
const replayed = workflow('streams-replayed', async (ctx: WorkflowContext) => {
  await ctx.writeStream('tokens', 'a');
  await ctx.sleep('nap', 10);
  await ctx.writeStream('tokens', 'b');
});

const limited = workflow('streams-limited', async (ctx: WorkflowContext<{ where: 'body' | 'step'; chunks: number; bytes: number }>) => {
  const write = async () => {
    for (let i = 0; i < ctx.input.chunks; i++) await ctx.writeStream('tokens', 'x'.repeat(ctx.input.bytes));
  };
  if (ctx.input.where === 'body') await write();
  else await ctx.step.run('write', write);
});

const afterClose = workflow('streams-after-close', async (ctx: WorkflowContext) => {
  await ctx.closeStream('tokens');
  await ctx.writeStream('tokens', 'late');
});

/** A secret in an event, a body chunk and a step's chunk. */
const secret = workflow('streams-secret', async (ctx: WorkflowContext) => {
  await ctx.setEvent('card', { number: 'SECRET-4242' });
  await ctx.writeStream('tokens', 'SECRET-body');
  await ctx.step.run('s', () => ctx.writeStream('tokens', { in: 'SECRET-step' }));
  await ctx.closeStream('tokens');
});

async function startApp() {
  const app = await bed.start({
    duraflow: {
      workflows: [tokens, live, retried, replayed, limited, afterClose],
      streams: { maxChunkBytes: 100, maxChunksPerTask: 3 },
      worker: { shutdownTimeoutMs: 100 },
    },
  });
  return app.get(WorkflowService);
}

async function readAll(workflows: WorkflowService, taskId: string, after?: number): Promise<StreamChunk[]> {
  const chunks: StreamChunk[] = [];
  for await (const chunk of workflows.readStream(taskId, 'tokens', { after })) chunks.push(chunk);
  return chunks;
}

describe('streams', () => {
  it('yields the chunks of the body and of a step once each, in order, from any offset, and ends at the close', async () => {
    const app = await bed.start({ duraflow: { workflows: [tokens], worker: { shutdownTimeoutMs: 100 } } });
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('streams-tokens');
    const chunks = await readAll(workflows, task.id);
    expect(chunks.map(({ seq, value }) => [seq, value])).toEqual([
      [1, 'body 1'],
      [2, 'in'],
      [3, 'the'],
      [4, 'step'],
      [5, { end: true }],
    ]);
    expect((await readAll(workflows, task.id, 3)).map((chunk) => chunk.value)).toEqual(['step', { end: true }]);
    expect(await readAll(workflows, task.id, 5)).toEqual([]);
  });

  it('is live: a reader gets a chunk while the run is still running, and the next one once it is written', async () => {
    const workflows = await startApp();
    const task = await workflows.submit('streams-live');
    const iterator = workflows.readStream(task.id, 'tokens')[Symbol.asyncIterator]();
    expect((await iterator.next()).value).toMatchObject({ seq: 1, value: 'first' });
    expect((await workflows.get(task.id))?.status).toBe(TaskStatus.RUNNING);
    const next = iterator.next();
    await eventually('the run is parked', () => gates.has(task.id));
    gates.get(task.id)!();
    expect((await next).value).toMatchObject({ seq: 2, value: 'second' });
    expect((await iterator.next()).done).toBe(true);
  });

  it('keeps only the chunks of the attempt that completed the step', async () => {
    const workflows = await startApp();
    const task = await workflows.submit('streams-retried');
    expect((await readAll(workflows, task.id)).map((chunk) => chunk.value)).toEqual(['y']);
    expect((await workflows.waitFor(task.id)).status).toBe(TaskStatus.COMPLETED);
  });

  it('does not repeat a body chunk when the run replays its body, and ends when the task ends without closing', async () => {
    const workflows = await startApp();
    const task = await workflows.submit('streams-replayed');
    expect((await readAll(workflows, task.id)).map(({ seq, value }) => [seq, value])).toEqual([
      [1, 'a'],
      [2, 'b'],
    ]);
    expect((await workflows.waitFor(task.id)).status).toBe(TaskStatus.COMPLETED);
  });

  it.each([
    ['a chunk too large, in the body', { where: 'body', chunks: 1, bytes: 200 }, 0],
    ['a chunk too large, in a step', { where: 'step', chunks: 1, bytes: 200 }, 0],
    ['one chunk too many, in the body', { where: 'body', chunks: 4, bytes: 1 }, 3],
    ['one chunk too many, in a step', { where: 'step', chunks: 4, bytes: 1 }, 0],
  ])('refuses %s with StreamLimitError (STREAM_LIMIT), writing nothing more', async (_, input, kept) => {
    const workflows = await startApp();
    const task = await workflows.submit('streams-limited', input);
    const finished = await workflows.waitFor(task.id, { timeoutMs: 20_000 });
    expect(finished.status).toBe(TaskStatus.FAILED);
    expect(finished.error).toMatchObject({ code: 'STREAM_LIMIT' });
    expect(await readAll(workflows, task.id)).toHaveLength(kept);
  });

  it('refuses a chunk after the close with StreamClosedError (STREAM_CLOSED)', async () => {
    const workflows = await startApp();
    const task = await workflows.submit('streams-after-close');
    const finished = await workflows.waitFor(task.id, { timeoutMs: 20_000 });
    expect(finished.error).toMatchObject({ code: 'STREAM_CLOSED' });
    expect(await readAll(workflows, task.id)).toEqual([]);
  });

  it('refuses a bad offset at once, and an unknown task when read', async () => {
    const workflows = await startApp();
    expect(() => workflows.readStream(randomUUID(), 'tokens', { after: -1 })).toThrow(InvalidListOptionsError);
    await expect(readAll(workflows, randomUUID())).rejects.toBeInstanceOf(TaskNotFoundError);
  });

  it('stores events and chunks encoded with a codec (no plaintext in PostgreSQL) and reads them back decoded', async () => {
    const app = await bed.start({
      duraflow: {
        workflows: [secret],
        codec: aesGcmCodec({ keys: { k1: randomBytes(32) }, current: 'k1' }),
        worker: { shutdownTimeoutMs: 100 },
      },
    });
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('streams-secret');
    expect((await readAll(workflows, task.id)).map((chunk) => chunk.value)).toEqual(['SECRET-body', { in: 'SECRET-step' }]);
    expect(await workflows.getEvent(task.id, 'card')).toEqual({ number: 'SECRET-4242' });
    const { rows } = await bed.db.client.query(
      `SELECT value::text AS stored FROM task_events WHERE task_id = $1 UNION ALL SELECT chunk::text FROM task_stream_chunks WHERE task_id = $1`,
      [task.id],
    );
    expect(rows).toHaveLength(3);
    for (const row of rows) expect(row.stored).not.toContain('SECRET');
  });

  it('deletes the chunks and streams with their task (retention)', async () => {
    const workflows = await startApp();
    const kept = await workflows.submit('streams-replayed');
    const gone = await workflows.submit('streams-replayed');
    for (const task of [kept, gone]) await workflows.waitFor(task.id, { timeoutMs: 20_000 });
    await bed.db.client.query(`DELETE FROM agent_tasks WHERE id = $1`, [gone.id]);
    const count = async (table: string, id: string) =>
      (await bed.db.client.query(`SELECT count(*)::int AS n FROM ${table} WHERE task_id = $1`, [id])).rows[0].n;
    expect([await count('task_stream_chunks', gone.id), await count('task_streams', gone.id)]).toEqual([0, 0]);
    expect([await count('task_stream_chunks', kept.id), await count('task_streams', kept.id)]).toEqual([2, 1]);
  });
});
