import { status } from '@grpc/grpc-js';
import { createDuraflowClient, DuraflowClient, grpcError } from './fixtures/engine/grpc-client';
import { http, startTestEngine } from './fixtures/engine/engine-app';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';
import { RunningEngine } from '../src/engine';

/*
 * The engine's signal APIs: HTTP `POST /tasks/:id/signals/:name` and gRPC `SignalTask`, over
 * the example `approval` workflow, with the error mapping cancel has (404 / NOT_FOUND, 409 /
 * FAILED_PRECONDITION, 400 / INVALID_ARGUMENT); a task's children and parent in its API shape.
 */

const MISSING_ID = '00000000-0000-4000-8000-000000000000';
const bed = useTestBed();

describe('the engine’s signal APIs', () => {
  let engine: RunningEngine;
  let client: DuraflowClient;

  beforeAll(async () => {
    engine = await startTestEngine(bed);
    client = bed.closeLater(createDuraflowClient(engine.grpcAddress!), async (opened) => opened.close());
  });

  const waiting = (id: string) =>
    eventually(`task ${id} waits for its signal`, async () => {
      const steps = (await http(engine, 'GET', `/tasks/${id}/steps`)).body;
      return steps.some((step: { stepKey: string; status: string }) => step.stepKey === 'signal:approval#1' && step.status === 'waiting');
    });
  const finished = (id: string) =>
    eventually(`task ${id} has ended`, async () => (await http(engine, 'GET', `/tasks/${id}`)).body, {
      until: (task) => !['pending', 'running'].includes(task.status),
    });

  it('HTTP: POST /tasks/:id/signals/approval resumes the waiting task with the payload', async () => {
    const created = await http(engine, 'POST', '/tasks', { body: { workflowName: 'approval', input: { request: 'laptop' } } });
    await waiting(created.body.id);

    const sent = await http(engine, 'POST', `/tasks/${created.body.id}/signals/approval`, {
      body: { payload: { approved: true, by: 'ada' } },
    });

    expect(sent.status).toBe(201);
    expect(sent.body).toMatchObject({ taskId: created.body.id, name: 'approval', wokeTask: true, signalId: expect.any(String) });
    expect(await finished(created.body.id)).toMatchObject({
      status: 'completed',
      output: { request: 'laptop', approved: true, by: 'ada' },
    });
    const signals = (await http(engine, 'GET', `/tasks/${created.body.id}/signals`)).body;
    expect(signals).toEqual([
      expect.objectContaining({ name: 'approval', payload: { approved: true, by: 'ada' }, consumedByStep: 'signal:approval#1' }),
    ]);
  });

  it('HTTP: 404 for an unknown task, 409 for a finished one, 400 for a bad id or name, writing nothing', async () => {
    const created = await http(engine, 'POST', '/tasks', { body: { workflowName: 'approval', input: { request: 'desk' } } });
    await http(engine, 'POST', `/tasks/${created.body.id}/cancel`);

    expect(await http(engine, 'POST', `/tasks/${MISSING_ID}/signals/approval`, { body: { payload: 1 } })).toMatchObject({
      status: 404,
      body: { code: 'TASK_NOT_FOUND' },
    });
    expect(await http(engine, 'POST', `/tasks/${created.body.id}/signals/approval`, { body: { payload: 1 } })).toMatchObject({
      status: 409,
      body: { code: 'TASK_ALREADY_FINISHED' },
    });
    expect((await http(engine, 'POST', `/tasks/not-a-uuid/signals/approval`, { body: {} })).status).toBe(400);
    expect(await http(engine, 'POST', `/tasks/${created.body.id}/signals/${'x'.repeat(201)}`, { body: {} })).toMatchObject({
      status: 400,
      body: { code: 'INVALID_SIGNAL_NAME' },
    });
    expect((await http(engine, 'GET', `/tasks/${created.body.id}/signals`)).body).toEqual([]);
  });

  it('gRPC: SignalTask resumes the waiting task; NOT_FOUND, FAILED_PRECONDITION and INVALID_ARGUMENT as for CancelTask', async () => {
    const submitted = await client.SubmitTask({ workflow_name: 'approval', input: JSON.stringify({ request: 'chair' }) });
    await waiting(submitted.id);

    const sent = await client.SignalTask({ task_id: submitted.id, name: 'approval', payload: JSON.stringify({ approved: false }) });

    expect(sent).toMatchObject({ woke_task: true, signal_id: expect.any(String) });
    expect(await finished(submitted.id)).toMatchObject({ status: 'completed', output: { approved: false } });
    await expect(client.SignalTask({ task_id: MISSING_ID, name: 'approval', payload: '' })).rejects.toEqual(grpcError(status.NOT_FOUND));
    await expect(client.SignalTask({ task_id: submitted.id, name: 'approval', payload: '' })).rejects.toEqual(
      grpcError(status.FAILED_PRECONDITION),
    );
    await expect(client.SignalTask({ task_id: submitted.id, name: 'bad name', payload: '' })).rejects.toEqual(
      grpcError(status.INVALID_ARGUMENT, /signal name/),
    );
    await expect(client.SignalTask({ task_id: submitted.id, name: 'approval', payload: '{nope' })).rejects.toEqual(
      grpcError(status.INVALID_ARGUMENT),
    );
    const task = await client.GetTask({ id: submitted.id });
    expect(task).toMatchObject({ parent_task_id: '', parent_step_key: '' });
    expect(await client.GetChildren({ task_id: submitted.id })).toEqual({ tasks: [] });
  });

  it('a parent lists its children in its task shape (HTTP childTaskIds, gRPC child_task_ids), and each child names its parent', async () => {
    const created = await http(engine, 'POST', '/tasks', {
      body: { workflowName: 'approval-batch', input: { requests: ['laptop', 'desk'] } },
    });
    const parent = await finished(created.body.id);
    expect(parent.status).toBe('completed');
    const childIds: string[] = parent.output.children;
    expect(childIds).toHaveLength(2);

    expect((await http(engine, 'GET', `/tasks/${created.body.id}`)).body.childTaskIds).toEqual(childIds);
    expect((await http(engine, 'GET', `/tasks/${created.body.id}/children`)).body.map((child: { id: string }) => child.id)).toEqual(
      childIds,
    );
    const first = (await http(engine, 'GET', `/tasks/${childIds[0]}`)).body;
    expect(first).toMatchObject({ workflowName: 'approval', parentTaskId: created.body.id, parentStepKey: 'approval-1', childTaskIds: [] });

    expect((await client.GetTask({ id: created.body.id })).child_task_ids).toEqual(childIds);
    expect(await client.GetTask({ id: childIds[1] })).toMatchObject({
      parent_task_id: created.body.id,
      parent_step_key: 'approval-2',
      child_task_ids: [],
    });
    await Promise.all(childIds.map((id) => http(engine, 'POST', `/tasks/${id}/cancel`)));
  });
});
