import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import {
  aesGcmCodec,
  DuraflowModuleOptions,
  InvalidDuraflowOptionsError,
  PayloadUnreadableError,
  TaskStatus,
  WorkflowContext,
  WorkflowService,
  workflow,
} from '@duraflow/nestjs';
import { exportRecordedRuns, replayCheck } from '@duraflow/nestjs/replay';
import { codecFromEnv } from '../libs/duraflow/src/codec/codec-from-env';
import { EngineConfigError, loadEngineConfig } from '../src/config/engine.config';
import { useTestBed } from './support/test-bed';

/*
 * Encryption at rest (issue 29 point 4): with aesGcmCodec, no payload a run handles (input, step
 * outputs, output, signals, log metadata, events, stream chunks, a child's input and output, a
 * failing step's error) appears in plaintext in any column of any table, while every API returns
 * the plaintext; a ciphertext moved to another row does not open.
 */

const bed = useTestBed({ databasePerTest: true });

const MARKER = 'zq-secret-7f3a91';
const key1 = randomBytes(32);
const codecK1 = () => aesGcmCodec({ keys: { k1: key1 }, current: 'k1' });

const child = workflow('codec-child', async (ctx: WorkflowContext<{ note: string }>) => {
  const echoed = await ctx.step.run('echo', () => ({ heard: ctx.input.note }));
  return { child: echoed.heard };
});

const everything = workflow('codec-everything', async (ctx: WorkflowContext<{ secret: string }>) => {
  ctx.log.info('started', { secret: ctx.input.secret });
  const first = await ctx.step.run('first', () => ({ stepSaw: `${ctx.input.secret}-step` }));
  await ctx.setEvent('progress', { secret: ctx.input.secret });
  await ctx.step.run('stream', async () => {
    await ctx.writeStream('tokens', `${ctx.input.secret}-chunk`);
    return 'streamed';
  });
  await ctx.closeStream('tokens');
  const signal = await ctx.waitForSignal<{ secret: string }>('go');
  const fromChild = await ctx.runChild<{ child: string }>('kid', 'codec-child', { note: `${signal.secret}-to-child` });
  await ctx.step.run(
    'flaky',
    ({ attempt }) => {
      if (attempt === 1) throw new Error(`first try failed for ${ctx.input.secret}`);
      return 'second try';
    },
    { retries: 1, backoff: { initialDelayMs: 1, maxDelayMs: 1 } },
  );
  return { done: first.stepSaw, fromChild: fromChild.child };
});

const failing = workflow('codec-failing', async (ctx: WorkflowContext<{ secret: string }>) => {
  await ctx.step.run('breaks', () => {
    throw new Error(`cannot process ${ctx.input.secret}`);
  });
});

const onEvent = workflow('codec-on-event', async (ctx: WorkflowContext<{ secret: string }>) => ({ got: ctx.input.secret }), {
  on: 'codec.secret',
});

const approval = workflow('codec-callback', async (ctx: WorkflowContext) => {
  const callback = await ctx.createCallback('approval');
  return { body: await ctx.waitForCallback(callback) };
});

const CALLBACKS = { baseUrl: 'https://hooks.example.com/api', secret: 'a-callback-secret-of-at-least-32-bytes!!' };
const WORKFLOWS = [child, everything, failing, onEvent, approval];

function startApp(duraflow: DuraflowModuleOptions = {}) {
  return bed.start({ duraflow: { workflows: WORKFLOWS, worker: { shutdownTimeoutMs: 200 }, ...duraflow } });
}

/** Every row of every table of the test's database whose text holds `text`, as `table: count`. */
async function tablesHolding(client: Client, text: string): Promise<Record<string, number>> {
  const { rows: tables } = await client.query<{ schema: string; name: string }>(
    `SELECT table_schema AS schema, table_name AS name FROM information_schema.tables
     WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')`,
  );
  const found: Record<string, number> = {};
  for (const table of tables) {
    const { rows } = await client.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${table.schema}"."${table.name}" t WHERE t::text LIKE '%' || $1 || '%'`,
      [text],
    );
    if (rows[0].n) found[`${table.schema}.${table.name}`] = rows[0].n;
  }
  return found;
}

async function runEverything(workflows: WorkflowService) {
  const task = await workflows.submit('codec-everything', { secret: MARKER });
  for (let i = 0; i < 200; i++) {
    const steps = await workflows.getSteps(task.id);
    if (steps.some((step) => step.kind === 'signal' && step.status === 'waiting')) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await workflows.signal(task.id, 'go', { secret: MARKER });
  const done = await workflows.waitFor(task.id, { timeoutMs: 30_000 });
  return { task, done };
}

describe('encryption at rest (aesGcmCodec)', () => {
  it('stores no payload in plaintext in any table, while the APIs return the plaintext', async () => {
    const app = await startApp({ codec: codecK1(), callbacks: CALLBACKS });
    const workflows = app.get(WorkflowService);
    const { task, done } = await runEverything(workflows);
    const waiting = await workflows.submit('codec-callback', {});
    let callbacks = await workflows.listCallbacks(waiting.id);
    for (let i = 0; i < 200 && !callbacks.length; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      callbacks = await workflows.listCallbacks(waiting.id);
    }
    await workflows.completeCallback(callbacks[0].id, { secret: MARKER });
    expect((await workflows.waitFor(waiting.id, { timeoutMs: 30_000 })).output).toEqual({ body: { secret: MARKER } });
    expect((await workflows.listCallbacks(waiting.id))[0]).toMatchObject({ status: 'completed' });
    const failed = await workflows.submit('codec-failing', { secret: MARKER });
    const failedTask = await workflows.waitFor(failed.id, { timeoutMs: 30_000 });
    const published = await workflows.publish('codec.secret', { secret: MARKER });
    const started = published.deliveries.find((delivery) => delivery.workflowName === 'codec-on-event')!;
    expect((await workflows.waitFor(started.taskId!, { timeoutMs: 30_000 })).output).toEqual({ got: MARKER });

    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(done.input).toEqual({ secret: MARKER });
    expect(done.output).toEqual({ done: `${MARKER}-step`, fromChild: `${MARKER}-to-child` });
    expect(failedTask.status).toBe(TaskStatus.FAILED);
    expect(failedTask.error?.message).toContain(MARKER);
    expect(failedTask.error?.code).toBeDefined();

    // Nothing of the marker anywhere in the database: every column of every table, as text.
    expect(await tablesHolding(bed.db.client, MARKER)).toEqual({});
    // ...and what stays readable is there: the error's code, the steps' keys.
    const { rows: errors } = await bed.db.client.query(`SELECT error->>'code' AS code FROM agent_tasks WHERE id = $1`, [failed.id]);
    expect(errors[0].code).toBe(failedTask.error?.code);
    const { rows: sealed } = await bed.db.client.query(`SELECT input->>'$enc' AS enc, input->>'k' AS k FROM agent_tasks WHERE id = $1`, [
      task.id,
    ]);
    expect(sealed[0]).toEqual({ enc: 'aes-256-gcm', k: 'k1' });

    // The APIs read it all back decoded.
    const steps = await workflows.getSteps(task.id);
    expect(steps.find((step) => step.stepKey === 'first')?.output).toEqual({ stepSaw: `${MARKER}-step` });
    expect(steps.find((step) => step.kind === 'signal')?.output).toEqual({ secret: MARKER });
    expect(steps.find((step) => step.kind === 'child')?.output).toEqual({ child: `${MARKER}-to-child` });
    const signals = await workflows.listSignals(task.id);
    expect(signals.items[0].payload).toEqual({ secret: MARKER });
    expect(signals.items[0].payloadPreview).toContain(MARKER);
    const logs = await workflows.getLogs(task.id);
    expect(logs.items[0].metadata).toEqual({ secret: MARKER });
    expect(await workflows.getEvent(task.id, 'progress')).toEqual({ secret: MARKER });
    const chunks: unknown[] = [];
    for await (const chunk of workflows.readStream(task.id, 'tokens')) chunks.push(chunk.value);
    expect(chunks).toEqual([`${MARKER}-chunk`]);
    const summaries = await workflows.getStepSummaries(failed.id);
    expect(JSON.stringify(summaries[0].error)).toContain(MARKER);
    const [kid] = await workflows.getChildren(task.id);
    expect(kid.input).toEqual({ note: `${MARKER}-to-child` });
  });

  it('fails to open a ciphertext copied to another task or another field', async () => {
    const app = await startApp({ codec: codecK1(), worker: { enabled: false } });
    const workflows = app.get(WorkflowService);
    const a = await workflows.submit('codec-failing', { secret: 'a' });
    const b = await workflows.submit('codec-failing', { secret: 'b' });
    await bed.db.client.query(`UPDATE agent_tasks SET input = (SELECT input FROM agent_tasks WHERE id = $1) WHERE id = $2`, [a.id, b.id]);
    await bed.db.client.query(`UPDATE agent_tasks SET output = input WHERE id = $1`, [a.id]);

    const movedRow = await workflows.get(b.id);
    expect(() => movedRow!.input).toThrow(PayloadUnreadableError);
    const movedField = await workflows.get(a.id);
    expect(movedField!.input).toEqual({ secret: 'a' });
    expect(() => movedField!.output).toThrow(expect.objectContaining({ code: 'PAYLOAD_UNREADABLE' }));
  });

  it('an idempotent submit compares the inputs decoded: the same input finds the task, another is refused', async () => {
    const app = await startApp({ codec: codecK1(), worker: { enabled: false } });
    const workflows = app.get(WorkflowService);
    const first = await workflows.submit('codec-child', { note: 'once', n: 1.0 }, { idempotencyKey: 'k-once' });
    const again = await workflows.submit('codec-child', { n: 1, note: 'once' }, { idempotencyKey: 'k-once' });
    expect(again.id).toBe(first.id);
    await expect(workflows.submit('codec-child', { note: 'other' }, { idempotencyKey: 'k-once' })).rejects.toMatchObject({
      code: 'IDEMPOTENCY_KEY_CONFLICT',
    });
    expect(await bed.rows.count('agent_tasks')).toBe(1);
  });

  it('reads rows written before the codec was turned on', async () => {
    const plain = await startApp();
    const before = await plain.get(WorkflowService).submit('codec-child', { note: 'from before' });
    await plain.get(WorkflowService).waitFor(before.id, { timeoutMs: 30_000 });
    await plain.close();

    const app = await startApp({ codec: codecK1() });
    const workflows = app.get(WorkflowService);
    const read = await workflows.get(before.id);
    expect(read!.input).toEqual({ note: 'from before' });
    expect(read!.output).toEqual({ child: 'from before' });
    expect((await workflows.getSteps(before.id))[0].output).toEqual({ heard: 'from before' });
    const after = await workflows.submit('codec-child', { note: 'after' });
    expect((await workflows.waitFor(after.id, { timeoutMs: 30_000 })).output).toEqual({ child: 'after' });
  });

  it('a fork re-encodes the steps it copies under its own id; the replay check and export-runs read with the codec', async () => {
    const codec = codecK1();
    const app = await startApp({ codec });
    const workflows = app.get(WorkflowService);
    const { task } = await runEverything(workflows);

    const fork = await workflows.fork(task.id, { fromStep: 'flaky' });
    const forked = await workflows.waitFor(fork.id, { timeoutMs: 30_000 });
    expect(forked.status).toBe(TaskStatus.COMPLETED);
    expect(forked.output).toEqual({ done: `${MARKER}-step`, fromChild: `${MARKER}-to-child` });
    const copied = await workflows.getSteps(fork.id);
    expect(copied.find((step) => step.stepKey === 'first')?.output).toEqual({ stepSaw: `${MARKER}-step` });
    expect(copied.find((step) => step.kind === 'signal')?.output).toEqual({ secret: MARKER });
    expect(await tablesHolding(bed.db.client, MARKER)).toEqual({});

    const exported = await exportRecordedRuns(bed.db.url, { includeFinished: true, workflowNames: ['codec-everything'] }, codec);
    const run = exported.runs.find((recorded) => recorded.taskId === task.id)!;
    expect(run.input).toEqual({ secret: MARKER });
    expect(run.steps.find((step) => step.stepKey === 'first')?.output).toEqual({ stepSaw: `${MARKER}-step` });
    const report = await replayCheck({ workflows: WORKFLOWS, databaseUrl: bed.db.url, codec, query: { includeFinished: true } });
    expect(report.errors).toEqual([]);
    expect(report.diverged).toEqual([]);
    expect(report.ok).toBeGreaterThanOrEqual(2);
    // Without the codec what is recorded is ciphertext.
    const blind = await exportRecordedRuns(bed.db.url, { includeFinished: true, workflowNames: ['codec-everything'] });
    expect(blind.runs.find((recorded) => recorded.taskId === task.id)!.input).toMatchObject({ $enc: 'aes-256-gcm', k: 'k1' });
  });

  it('refuses a key that is not 32 bytes and a current key that is not one of the keys, at boot', () => {
    expect(() => aesGcmCodec({ keys: { k1: randomBytes(16) }, current: 'k1' })).toThrow(InvalidDuraflowOptionsError);
    expect(() => aesGcmCodec({ keys: { k1: 'not base64 at all!' }, current: 'k1' })).toThrow(InvalidDuraflowOptionsError);
    expect(() => aesGcmCodec({ keys: { k1: key1 }, current: 'k2' })).toThrow(/current/);
    expect(() => codecFromEnv({ DURAFLOW_CODEC_KEYS: `k1:${key1.toString('base64')},k2:${key1.toString('base64')}` })).toThrow(
      /DURAFLOW_CODEC_CURRENT/,
    );
    expect(codecFromEnv({ DURAFLOW_CODEC_KEYS: `k1:${key1.toString('base64')}` })?.currentKeyId).toBe('k1');
    expect(codecFromEnv({})).toBeUndefined();
  });

  it("the engine's configuration takes DURAFLOW_CODEC_KEYS and _CURRENT, and never prints a key", () => {
    const keys = `e2:${randomBytes(32).toString('base64')},e1:${key1.toString('base64')}`;
    expect(loadEngineConfig({ DURAFLOW_CODEC_KEYS: keys, DURAFLOW_CODEC_CURRENT: 'e2' }).codec).toMatchObject({
      currentKeyId: 'e2',
      keyIds: ['e2', 'e1'],
    });
    expect(loadEngineConfig({}).codec).toBeUndefined();
    const short = 'c2hvcnQta2V5LXNlY3JldA==';
    expect(() => loadEngineConfig({ DURAFLOW_CODEC_KEYS: `e1:${short}` })).toThrow(EngineConfigError);
    expect(() => loadEngineConfig({ DURAFLOW_CODEC_KEYS: `e1:${short}` })).not.toThrow(new RegExp(short.slice(0, 8)));
    expect(() => loadEngineConfig({ DURAFLOW_CODEC_KEYS: keys, DURAFLOW_CODEC_CURRENT: 'e3' })).toThrow(/DURAFLOW_CODEC_CURRENT/);
  });
});
