import { randomUUID } from 'node:crypto';
import { Metadata, status } from '@grpc/grpc-js';
import { createDuraflowClient, DuraflowClient, grpcError } from './fixtures/engine/grpc-client';
import { startTestEngine } from './fixtures/engine/engine-app';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';
import { seedBookedFlight, seedDeadLetter, seedLargeTasks } from './fixtures/engine/seeded-tasks';
import { RunningEngine } from '../src/engine';

const MISSING_ID = '00000000-0000-4000-8000-000000000000';
const LATER = new Date(Date.now() + 3_600_000).toISOString();
const booking = (extra: object = {}) => JSON.stringify({ customer: 'ada', from: 'AMS', to: 'LIS', ...extra });

describe('the engine gRPC API (duraflow.v1.Duraflow), with a client generated from the proto', () => {
  const bed = useTestBed();
  let engine: RunningEngine;
  let client: DuraflowClient;

  beforeAll(async () => {
    engine = await startTestEngine(bed);
    client = bed.closeLater(createDuraflowClient(engine.grpcAddress!), async (opened) => opened.close());
  });

  const finished = (id: string) =>
    eventually(`task ${id} has ended`, () => client.GetTask({ id }), {
      until: (task) => !['TASK_STATUS_PENDING', 'TASK_STATUS_RUNNING'].includes(task.status),
    });

  it('submits a booking and GetTask sees it completed with its output', async () => {
    const submitted = await client.SubmitTask({ workflow_name: 'booking', input: booking(), priority: 5 });
    expect(submitted).toMatchObject({ workflow_name: 'booking', status: 'TASK_STATUS_PENDING', priority: 5, max_retries: 3 });
    expect(JSON.parse(submitted.input)).toEqual({ customer: 'ada', from: 'AMS', to: 'LIS' });

    const done = await finished(submitted.id);
    expect(done.status).toBe('TASK_STATUS_COMPLETED');
    expect(JSON.parse(done.output)).toEqual({ flight: 'flight-ada-AMS-LIS', hotel: 'hotel-ada-AMS-LIS', car: 'car-ada-AMS-LIS' });
    expect(done.completed_at).not.toBe('');
  });

  it('rolls back a booking whose car fails: rolled_back, and GetSteps shows the booked legs compensated', async () => {
    const submitted = await client.SubmitTask({ workflow_name: 'booking', input: booking({ failAt: 'car' }) });
    const done = await finished(submitted.id);
    expect(done.status).toBe('TASK_STATUS_ROLLED_BACK');
    expect(JSON.parse(done.error)).toMatchObject({ code: 'STEP_FAILED', stepKey: 'book-car' });
    expect(done.rollback_reason).toBe('failed');

    const { steps } = await client.GetSteps({ task_id: submitted.id });
    expect(steps.map((s: any) => [s.step_key, s.status, s.compensated_at !== ''])).toEqual([
      ['book-flight', 'completed', true],
      ['book-hotel', 'completed', true],
      ['book-car', 'failed', false],
    ]);
    expect(steps[0].compensation_fn).toBe('booking.compensations.book-flight');
    expect(JSON.parse(steps[0].output)).toEqual({ leg: 'flight', reference: 'flight-ada-AMS-LIS' });
  });

  it('passes every submit option through: scheduled_at, max_retries (0 included) and idempotency_key', async () => {
    const first = await client.SubmitTask({
      workflow_name: 'booking',
      input: booking(),
      scheduled_at: LATER,
      max_retries: 0,
      idempotency_key: 'grpc-once',
    });
    const created: string[] = [];
    const again = await client.SubmitTask(
      { workflow_name: 'booking', input: booking(), idempotency_key: 'grpc-once' },
      undefined,
      (metadata) => created.push(String(metadata.get('created')[0])),
    );
    expect(again.id).toBe(first.id);
    expect(created).toEqual(['false']);
    expect(first).toMatchObject({ status: 'TASK_STATUS_PENDING', max_retries: 0, idempotency_key: 'grpc-once', scheduled_at: LATER });
  });

  it('says in the response metadata that a submit created its task, and refuses a key reused with another input (ALREADY_EXISTS)', async () => {
    const created: string[] = [];
    await client.SubmitTask(
      { workflow_name: 'booking', input: booking(), scheduled_at: LATER, idempotency_key: 'grpc-conflict' },
      undefined,
      (metadata) => created.push(String(metadata.get('created')[0])),
    );
    expect(created).toEqual(['true']);
    const other = JSON.stringify({ ...JSON.parse(booking()), customer: 'someone-else' });
    await expect(client.SubmitTask({ workflow_name: 'booking', input: other, idempotency_key: 'grpc-conflict' })).rejects.toEqual(
      grpcError(status.ALREADY_EXISTS, /idempotency/i),
    );
  });

  it('lists tasks newest first by status and workflow, page by page', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push(
        (await client.SubmitTask({ workflow_name: 'order-processing', input: JSON.stringify({ orderId: `o${i}` }), scheduled_at: LATER }))
          .id,
      );
    }
    const first = await client.ListTasks({ status: 'TASK_STATUS_PENDING', workflow_name: 'order-processing', limit: 2 });
    expect(first.tasks.map((t: any) => t.id)).toEqual([ids[2], ids[1]]);
    expect(first.next_cursor).not.toBe('');
    const second = await client.ListTasks({
      status: 'TASK_STATUS_PENDING',
      workflow_name: 'order-processing',
      limit: 2,
      cursor: first.next_cursor,
    });
    expect(second.tasks.map((t: any) => t.id)).toEqual([ids[0]]);
    expect(second.next_cursor).toBe('');

    const completed = await client.ListTasks({ status: 'TASK_STATUS_COMPLETED', workflow_name: 'order-processing' });
    expect(completed.tasks).toEqual([]);
  });

  it('submits with tags (shown in Task.tags, empty when none) and lists by tags as an AND; INVALID_ARGUMENT for bad tags', async () => {
    const submit = (tags?: Record<string, string>) =>
      client.SubmitTask({ workflow_name: 'booking', input: booking(), scheduled_at: LATER, tags });
    const eu = await submit({ tenant: 'grpc-acme', region: 'eu' });
    const us = await submit({ tenant: 'grpc-acme', region: 'us' });
    const untagged = await submit();
    expect(eu.tags).toEqual({ tenant: 'grpc-acme', region: 'eu' });
    expect((await client.GetTask({ id: untagged.id })).tags).toEqual({});
    const ids = async (tags: Record<string, string>) => (await client.ListTasks({ tags })).tasks.map((t: any) => t.id);
    expect(await ids({ tenant: 'grpc-acme' })).toEqual([us.id, eu.id]);
    expect(await ids({ tenant: 'grpc-acme', region: 'eu' })).toEqual([eu.id]);
    expect(await client.CancelTasks({ filter: { tags: { tenant: 'grpc-acme', region: 'us' } }, dry_run: true })).toEqual({
      matched: 1,
      changed: 0,
    });
    await expect(client.ListTasks({ tags: { 'bad key': 'v' } })).rejects.toEqual(grpcError(status.INVALID_ARGUMENT, /tags/));
    await expect(submit({ tenant: 'x'.repeat(257) })).rejects.toEqual(grpcError(status.INVALID_ARGUMENT, /at most 256 characters/));
  });

  it('cancels a pending task, and answers FAILED_PRECONDITION to cancelling it again', async () => {
    const task = await client.SubmitTask({ workflow_name: 'booking', input: booking(), scheduled_at: LATER });
    const cancelled = await client.CancelTask({ id: task.id });
    expect(cancelled.status).toBe('TASK_STATUS_CANCELLED');
    await expect(client.CancelTask({ id: task.id })).rejects.toEqual(
      grpcError(status.FAILED_PRECONDITION, /already finished with status "cancelled"/),
    );
  });

  it('shows the version and the hold of a task, and resumes a held one; FAILED_PRECONDITION for one not held', async () => {
    const task = await client.SubmitTask({ workflow_name: 'booking', input: booking(), scheduled_at: LATER });
    expect(task).toMatchObject({ workflow_version: 0, held_at: '' });
    await expect(client.ResumeTask({ id: task.id })).rejects.toEqual(grpcError(status.FAILED_PRECONDITION, /is not held/));
    await bed.db.client.query(`UPDATE agent_tasks SET held_at = now(), error = '{"code":"NON_DETERMINISM"}' WHERE id = $1`, [task.id]);
    expect((await client.GetTask({ id: task.id })).held_at).not.toBe('');
    const resumed = await client.ResumeTask({ id: task.id });
    expect(resumed).toMatchObject({ id: task.id, status: 'TASK_STATUS_PENDING', held_at: '', error: '' });
    await client.CancelTask({ id: task.id });
  });

  it('cancels with compensate: true, which also undoes the steps that completed', async () => {
    const plain = await seedBookedFlight(bed.db.client, 'pending');
    const compensated = await seedBookedFlight(bed.db.client, 'pending');
    await client.CancelTask({ id: plain.taskId });
    await client.CancelTask({ id: compensated.taskId, compensate: true });
    const undone = async (taskId: string) => (await client.GetSteps({ task_id: taskId })).steps[0].compensated_at !== '';
    expect(await undone(plain.taskId)).toBe(false);
    expect(await undone(compensated.taskId)).toBe(true);
    expect(await client.GetTask({ id: compensated.taskId })).toMatchObject({
      status: 'TASK_STATUS_CANCELLED',
      rollback_reason: 'cancelled',
    });
    expect(await client.GetTask({ id: plain.taskId })).toMatchObject({ status: 'TASK_STATUS_CANCELLED', rollback_reason: '' });
  });

  it('lists dead letters and retries one: the compensation runs and the task is rolled_back', async () => {
    const seeded = await seedDeadLetter(bed.db.client);
    const page = await client.ListDeadLetters({ task_id: seeded.taskId });
    expect(page.dead_letters).toEqual([
      expect.objectContaining({ id: seeded.deadLetterId, task_id: seeded.taskId, step_id: seeded.stepId, retry_count: 0 }),
    ]);
    expect(JSON.parse(page.dead_letters[0].error)).toMatchObject({ message: 'flight API unavailable' });

    const retried = await client.RetryDeadLetter({ id: seeded.deadLetterId });
    expect(retried.outcome).toBe('RETRY_OUTCOME_COMPENSATED');
    expect(retried.task).toMatchObject({ id: seeded.taskId, status: 'TASK_STATUS_ROLLED_BACK' });
    expect(retried.dead_letter).toBeNull();
    expect((await client.ListDeadLetters({ task_id: seeded.taskId })).dead_letters).toEqual([]);
  });

  it('fails a booking whose output would be over 1 MiB with OUTPUT_TOO_LARGE, rolls it back, and stores nothing over the limit', async () => {
    const customer = 'c'.repeat(400_000); // three legs of it: a 1.2 MB output
    const submitted = await client.SubmitTask({ workflow_name: 'booking', input: JSON.stringify({ customer, from: 'AMS', to: 'LIS' }) });

    const done = await finished(submitted.id);

    expect(done.status).toBe('TASK_STATUS_ROLLED_BACK');
    expect(JSON.parse(done.error)).toMatchObject({
      code: 'OUTPUT_TOO_LARGE',
      message: expect.stringMatching(/over the limit of 1048576 bytes/),
    });
    expect(done.output).toBe('');
    const { steps } = await client.GetSteps({ task_id: submitted.id });
    expect(steps.map((step: any) => [step.step_key, step.compensated_at !== ''])).toEqual([
      ['book-flight', true],
      ['book-hotel', true],
      ['book-car', true],
    ]);
    const { rows } = await bed.db.client.query(
      `SELECT max(octet_length(output::text)) AS largest FROM (
         SELECT output FROM step_runs UNION ALL SELECT output FROM agent_tasks) outputs`,
    );
    expect(Number(rows[0].largest)).toBeLessThanOrEqual(1024 * 1024);
  });

  it('pages ListTasks over tasks of a megabyte each within what a default client receives (4 MiB)', async () => {
    const ids = await seedLargeTasks(bed.db.client, 'grpc-bulk', 6, 500_000);

    const listed: string[] = [];
    let cursor = '';
    do {
      const page = await client.ListTasks({ workflow_name: 'grpc-bulk', limit: 1000, cursor });
      expect(page.tasks.length).toBeLessThan(ids.length);
      listed.push(...page.tasks.map((task: any) => task.id));
      cursor = page.next_cursor;
    } while (cursor && listed.length <= ids.length);
    expect(listed).toEqual(ids);
  });

  describe('maps errors to gRPC status codes', () => {
    it('unknown workflow: NOT_FOUND, naming no registered one', async () => {
      await expect(client.SubmitTask({ workflow_name: 'no-such-flow', input: '{}' })).rejects.toEqual(
        grpcError(status.NOT_FOUND, /^No workflow named "no-such-flow" is registered\. Check the workflow name\.$/),
      );
    });

    it('input failing the workflow DTO: INVALID_ARGUMENT with the violations', async () => {
      const error = await client.SubmitTask({ workflow_name: 'booking', input: booking({ failAt: 'boat', to: '' }) }).catch((e) => e);
      expect(error).toEqual(grpcError(status.INVALID_ARGUMENT, /failAt must be one of the following values: flight, hotel, car/));
      expect(error.details).toMatch(/to should not be empty/);
      expect(error.metadata.get('error-code')).toEqual(['INVALID_INPUT']);
      const violations = JSON.parse(String(error.metadata.get('violations')[0]));
      expect(violations.map((v: any) => v.property).sort()).toEqual(['failAt', 'to']);
    });

    it('input that is not JSON, a bad workflow name, a bad scheduled_at: INVALID_ARGUMENT', async () => {
      await expect(client.SubmitTask({ workflow_name: 'booking', input: '{not json' })).rejects.toEqual(
        grpcError(status.INVALID_ARGUMENT, /The field "input" is not valid JSON/),
      );
      await expect(client.SubmitTask({ workflow_name: 'bad name!', input: '{}' })).rejects.toEqual(
        grpcError(status.INVALID_ARGUMENT, /Invalid workflow name/),
      );
      await expect(client.SubmitTask({ workflow_name: 'booking', input: booking(), scheduled_at: 'tomorrow' })).rejects.toEqual(
        grpcError(status.INVALID_ARGUMENT, /scheduledAt/),
      );
    });

    it('unknown task: NOT_FOUND from GetTask, GetSteps and CancelTask', async () => {
      for (const call of [
        () => client.GetTask({ id: MISSING_ID }),
        () => client.GetSteps({ task_id: MISSING_ID }),
        () => client.CancelTask({ id: MISSING_ID }),
      ]) {
        await expect(call()).rejects.toEqual(grpcError(status.NOT_FOUND, /No task with id/));
      }
    });

    it('bad list options: INVALID_ARGUMENT', async () => {
      await expect(client.ListTasks({ limit: 5000 })).rejects.toEqual(grpcError(status.INVALID_ARGUMENT, /limit/));
      await expect(client.ListTasks({ cursor: 'garbage' })).rejects.toEqual(grpcError(status.INVALID_ARGUMENT, /cursor/));
      await expect(client.ListDeadLetters({ task_id: 'nope' })).rejects.toEqual(grpcError(status.INVALID_ARGUMENT, /task_id/));
    });

    it('a tampered cursor whose time overflows: INVALID_ARGUMENT with error-code INVALID_CURSOR, from ListTasks and ListDeadLetters', async () => {
      const cursor = Buffer.from(`9999999999999999999:${randomUUID()}`).toString('base64url');
      for (const call of [() => client.ListTasks({ cursor }), () => client.ListDeadLetters({ cursor })]) {
        const error = await call().catch((e) => e);
        expect(error).toEqual(grpcError(status.INVALID_ARGUMENT, /Invalid list cursor/));
        expect(error.metadata.get('error-code')).toEqual(['INVALID_CURSOR']);
      }
    });

    it('input nested 3,000 and 5,000 levels deep: INVALID_ARGUMENT with error-code INVALID_INPUT, nothing written', async () => {
      const before = await bed.rows.count('agent_tasks');
      for (const depth of [3_000, 5_000]) {
        const input = `{"customer":"ada","from":"AMS","to":"LIS","notes":${'['.repeat(depth)}${']'.repeat(depth)}}`;
        const error = await client.SubmitTask({ workflow_name: 'booking', input }).catch((e) => e);
        expect(error).toEqual(grpcError(status.INVALID_ARGUMENT, /notes.*must not nest objects and arrays deeper than 100 levels/));
        expect(error.metadata.get('error-code')).toEqual(['INVALID_INPUT']);
      }
      expect(await bed.rows.count('agent_tasks')).toBe(before);
    });

    it('unknown dead letter: NOT_FOUND; one whose compensation is not registered: FAILED_PRECONDITION', async () => {
      await expect(client.RetryDeadLetter({ id: MISSING_ID })).rejects.toEqual(grpcError(status.NOT_FOUND, /No dead letter/));
      const orphan = await seedDeadLetter(bed.db.client, 'booking.compensations.gone');
      await expect(client.RetryDeadLetter({ id: orphan.deadLetterId })).rejects.toEqual(
        grpcError(status.FAILED_PRECONDITION, /booking\.compensations\.gone/),
      );
    });

    it('a call without the API key, when one is set: UNAUTHENTICATED', async () => {
      const keyed = await startTestEngine(bed, { DURAFLOW_API_KEY: 'grpc-secret' });
      const anonymous = createDuraflowClient(keyed.grpcAddress!);
      const wrong = createDuraflowClient(keyed.grpcAddress!, { 'x-api-key': 'guess' });
      const authorised = createDuraflowClient(keyed.grpcAddress!, { 'x-api-key': 'grpc-secret' });
      try {
        await expect(anonymous.ListTasks({})).rejects.toEqual(grpcError(status.UNAUTHENTICATED, /x-api-key/));
        await expect(wrong.SubmitTask({ workflow_name: 'booking', input: booking() })).rejects.toEqual(grpcError(status.UNAUTHENTICATED));
        const metadata = new Metadata();
        metadata.set('x-api-key', 'grpc-secret');
        await expect(anonymous.ListTasks({ limit: 1 }, metadata)).resolves.toMatchObject({ tasks: expect.any(Array) });
        await expect(authorised.GetTask({ id: MISSING_ID })).rejects.toEqual(grpcError(status.NOT_FOUND));
      } finally {
        for (const c of [anonymous, wrong, authorised]) c.close();
      }
    });
  });
});
