import { randomBytes } from 'node:crypto';
import {
  aesGcmCodec,
  DuraflowDashboardModule,
  DuraflowModuleOptions,
  PayloadCodec,
  PayloadUnreadableError,
  TaskStatus,
  WorkflowContext,
  WorkflowService,
  workflow,
} from '@duraflow/nestjs';
import { OPERATOR_HEADERS, OperatorGuard } from './fixtures/dashboard/dashboard-app';
import { http, startTestEngine } from './fixtures/engine/engine-app';
import { duraflowCli } from './support/duraflow-cli';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * Encryption at rest, keys over time: rotation (old keys still decode, `duraflow reencrypt`
 * moves every row to the current key, then the old key can go), a key no row opens (a typed
 * error for that read, the worker fails that task and runs the others), and the engine's codec
 * from the environment.
 */

jest.setTimeout(180_000);

const bed = useTestBed({ databasePerTest: true });

const key1 = randomBytes(32);
const key2 = randomBytes(32);
const b64 = (key: Buffer) => key.toString('base64');

const echo = workflow('rotate-echo', async (ctx: WorkflowContext<{ note: string }>) => {
  ctx.log.info('echo', { note: ctx.input.note });
  const step = await ctx.step.run('hear', () => ({ heard: ctx.input.note }));
  return { said: step.heard };
});

const broken = workflow('rotate-broken', async (ctx: WorkflowContext<{ note: string }>) => {
  await ctx.step.run('fail', () => {
    throw new Error(`refused ${ctx.input.note}`);
  });
});

function startApp(codec: PayloadCodec | undefined, duraflow: DuraflowModuleOptions = {}) {
  return bed.start({
    duraflow: { workflows: [echo, broken], worker: { shutdownTimeoutMs: 200 }, ...(codec ? { codec } : {}), ...duraflow },
  });
}

/** Payload values in the database sealed under `keyId` (every payload column, an error's sealed part too). */
async function rowsUnderKey(keyId: string): Promise<number> {
  const { rows } = await bed.db.client.query<{ n: number }>(
    `SELECT (SELECT count(*) FILTER (WHERE input->>'k' = $1) + count(*) FILTER (WHERE output->>'k' = $1)
                  + count(*) FILTER (WHERE error->'$encoded'->>'k' = $1) FROM agent_tasks)
          + (SELECT count(*) FILTER (WHERE output->>'k' = $1) + count(*) FILTER (WHERE error->'$encoded'->>'k' = $1) FROM step_runs)
          + (SELECT count(*) FROM task_logs WHERE metadata->>'k' = $1)
          + (SELECT count(*) FROM task_signals WHERE payload->>'k' = $1) AS n`,
    [keyId],
  );
  return Number(rows[0].n);
}

async function runTasks(workflows: WorkflowService, notes: string[]) {
  const ids: string[] = [];
  for (const note of notes) ids.push((await workflows.submit('rotate-echo', { note })).id);
  const failed = await workflows.submit('rotate-broken', { note: `${notes[0]}-broken` }, { maxRetries: 0 });
  for (const id of [...ids, failed.id]) await workflows.waitFor(id, { timeoutMs: 30_000 });
  return { ids, failedId: failed.id };
}

describe('key rotation and unreadable payloads', () => {
  it('reads old rows after a rotation; reencrypt moves every row to the current key; then the old key can go', async () => {
    const first = await startApp(aesGcmCodec({ keys: { k1: key1 }, current: 'k1' }));
    const old = await runTasks(first.get(WorkflowService), ['one', 'two']);
    await first.close();
    const underK1 = await rowsUnderKey('k1');
    expect(underK1).toBe(11); // 3 inputs, 2 outputs, 1 error; 2 step outputs, 1 step error; 2 log lines' metadata

    const rotated = await startApp(aesGcmCodec({ keys: { k2: key2, k1: key1 }, current: 'k2' }));
    const workflows = rotated.get(WorkflowService);
    expect((await workflows.get(old.ids[0]))!.output).toEqual({ said: 'one' });
    const fresh = await runTasks(workflows, ['three']);
    expect((await workflows.get(fresh.ids[0]))!.output).toEqual({ said: 'three' });
    expect(await rowsUnderKey('k2')).toBeGreaterThan(0);
    expect(await rowsUnderKey('k1')).toBe(underK1);
    await rotated.close();

    const env = { DATABASE_URL: bed.db.url, DURAFLOW_CODEC_KEYS: `k2:${b64(key2)},k1:${b64(key1)}`, DURAFLOW_CODEC_CURRENT: 'k2' };
    const run = await duraflowCli(['reencrypt', '--batch-size', '2'], env);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(new RegExp(`Re-encrypted ${underK1} values? .* under key k2`));
    expect(run.stdout).toContain('agent_tasks.input: 3 rewritten');
    expect(await rowsUnderKey('k1')).toBe(0);
    const again = await duraflowCli(['reencrypt', '--json'], env);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ currentKey: 'k2', rewritten: 0, unreadable: 0 });

    const onlyK2 = await startApp(aesGcmCodec({ keys: { k2: key2 }, current: 'k2' }));
    const reader = onlyK2.get(WorkflowService);
    expect((await reader.get(old.ids[1]))!.input).toEqual({ note: 'two' });
    expect((await reader.getSteps(old.ids[1]))[0].output).toEqual({ heard: 'two' });
    expect((await reader.getLogs(old.ids[1])).items[0].metadata).toEqual({ note: 'two' });
    expect((await reader.get(old.failedId))!.error?.message).toContain('refused one-broken');
  });

  it('reencrypt: no keys is a usage error (2); a row no key opens is left and reported (1)', async () => {
    const app = await startApp(aesGcmCodec({ keys: { k1: key1 }, current: 'k1' }), { worker: { enabled: false } });
    const task = await app.get(WorkflowService).submit('rotate-echo', { note: 'sealed' });
    const noKeys = await duraflowCli(['reencrypt'], { DATABASE_URL: bed.db.url });
    expect(noKeys.code).toBe(2);
    const badKey = await duraflowCli(['reencrypt'], { DATABASE_URL: bed.db.url, DURAFLOW_CODEC_KEYS: 'k2:short' });
    expect(badKey.code).toBe(2);
    expect(badKey.stderr).not.toContain('short');

    const wrong = await duraflowCli(['reencrypt'], { DATABASE_URL: bed.db.url, DURAFLOW_CODEC_KEYS: `k2:${b64(key2)}` });
    expect(wrong.code).toBe(1);
    expect(wrong.stdout).toContain(`cannot decrypt: agent_tasks.input (id) = (${task.id})`);
    expect(await rowsUnderKey('k1')).toBe(1);
  });

  it('duraflow tasks reads with DURAFLOW_CODEC_KEYS, and without them shows a sealed error as such', async () => {
    const app = await startApp(aesGcmCodec({ keys: { k1: key1 }, current: 'k1' }));
    const { failedId } = await runTasks(app.get(WorkflowService), ['cli']);
    const env = { DATABASE_URL: bed.db.url, DURAFLOW_CODEC_KEYS: `k1:${b64(key1)}` };

    const shown = await duraflowCli(['tasks', 'show', failedId, '--json'], env);
    expect(shown.code).toBe(0);
    const report = JSON.parse(shown.stdout);
    expect(report.task.input).toEqual({ note: 'cli-broken' });
    expect(report.task.error.message).toContain('refused cli-broken');
    const blind = await duraflowCli(['tasks', 'list', '--status', 'failed'], { DATABASE_URL: bed.db.url });
    expect(blind.code).toBe(0);
    expect(blind.stdout).toContain('[encrypted');
    expect(blind.stdout).not.toContain('refused cli-broken');
  });

  it('a key that opens nothing: the read is a typed error, the worker fails those tasks and runs the others', async () => {
    const writer = await startApp(aesGcmCodec({ keys: { k1: key1 }, current: 'k1' }), { worker: { enabled: false } });
    const sealed = await writer.get(WorkflowService).submit('rotate-echo', { note: 'under k1' }, { maxRetries: 0 });
    await writer.close();

    const app = await startApp(aesGcmCodec({ keys: { k9: key2 }, current: 'k9' }));
    const workflows = app.get(WorkflowService);
    const failed = await workflows.waitFor(sealed.id, { timeoutMs: 30_000 });
    expect(failed.status).toBe(TaskStatus.FAILED);
    expect(failed.error?.code).toBe('PAYLOAD_UNREADABLE');
    expect(() => failed.input).toThrow(PayloadUnreadableError);
    const other = await workflows.submit('rotate-echo', { note: 'under k9' });
    expect((await workflows.waitFor(other.id, { timeoutMs: 30_000 })).output).toEqual({ said: 'under k9' });

    // The same key id with other bytes (a wrong key, or a value changed in the database).
    const tampered = await startApp(aesGcmCodec({ keys: { k1: key2 }, current: 'k1' }), { worker: { enabled: false } });
    const read = await tampered.get(WorkflowService).get(sealed.id);
    expect(() => read!.input).toThrow(expect.objectContaining({ code: 'PAYLOAD_UNREADABLE', taskId: sealed.id, field: 'input' }));
  });

  it('the dashboard shows a row no key opens as "cannot decrypt"', async () => {
    const writer = await startApp(aesGcmCodec({ keys: { k1: key1 }, current: 'k1' }), { worker: { enabled: false } });
    const sealed = await writer.get(WorkflowService).submit('rotate-echo', { note: 'zq-hidden-note' });
    await writer.close();
    const app = await bed.serve({
      duraflow: { workflows: [echo, broken], worker: { enabled: false }, codec: aesGcmCodec({ keys: { k2: key2 }, current: 'k2' }) },
      imports: [DuraflowDashboardModule.forRoot({ path: '/ops/duraflow', guards: [OperatorGuard] })],
    });

    const list = await fetch(`${app.url}/ops/duraflow`, { headers: OPERATOR_HEADERS });
    expect(list.status).toBe(200);
    expect(await list.text()).toContain(sealed.id);
    const page = await fetch(`${app.url}/ops/duraflow/tasks/${sealed.id}`, { headers: OPERATOR_HEADERS });
    const html = await page.text();
    expect(page.status).toBe(200);
    expect(html).toContain('[cannot decrypt]');
    expect(html).not.toContain('zq-hidden-note');
    const value = await fetch(`${app.url}/ops/duraflow/tasks/${sealed.id}/values/input`, { headers: OPERATOR_HEADERS });
    expect(value.status).toBe(200);
    expect(await value.text()).toBe('"[cannot decrypt]"');
  });

  it('the engine reads its codec from DURAFLOW_CODEC_KEYS: HTTP answers plaintext, the database holds none; an unreadable task is a 500 PAYLOAD_UNREADABLE', async () => {
    const engine = await startTestEngine(bed, { DURAFLOW_CODEC_KEYS: `e1:${b64(key1)}`, DURAFLOW_CODEC_CURRENT: 'e1' });
    const created = await http(engine, 'POST', '/tasks', {
      body: { workflowName: 'booking', input: { customer: 'zq-engine-secret', from: 'AMS', to: 'LIS' } },
    });
    expect(created.status).toBe(201);
    expect(created.body.input.customer).toBe('zq-engine-secret');
    const done = await eventually('the booking ends', async () => (await http(engine, 'GET', `/tasks/${created.body.id}`)).body, {
      until: (task) => task.status === 'completed',
    });
    expect(done.output.flight).toContain('zq-engine-secret');
    const { rows } = await bed.db.client.query(
      `SELECT count(*)::int AS n FROM step_runs s JOIN agent_tasks t ON t.id = s.task_id WHERE t::text LIKE '%zq-engine%' OR s::text LIKE '%zq-engine%'`,
    );
    expect(rows[0].n).toBe(0);

    const other = await startApp(aesGcmCodec({ keys: { x1: key2 }, current: 'x1' }), { worker: { enabled: false } });
    const alien = await other.get(WorkflowService).submit('rotate-echo', { note: 'not for the engine' });
    const answer = await http(engine, 'GET', `/tasks/${alien.id}`);
    expect(answer.status).toBe(500);
    expect(answer.body).toMatchObject({ code: 'PAYLOAD_UNREADABLE' });
  });
});
