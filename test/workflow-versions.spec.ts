import {
  DuplicateWorkflowError,
  InvalidSubmitOptionsError,
  TaskStatus,
  UnknownWorkflowVersionError,
  workflow,
  WorkflowService,
} from '@duraflow/nestjs';
import { VERSIONED_WORKFLOW, VersionedBookingV1, VersionedBookingV2 } from './fixtures/deploys/versioned-booking';
import { SUBMIT_ONLY, useTestBed } from './support/test-bed';

describe('Workflow versions', () => {
  const bed = useTestBed({ databasePerTest: true });

  it('starts the newest registered version unless { version } says otherwise, and records the version each task started on', async () => {
    const app = await bed.start({ duraflow: SUBMIT_ONLY, providers: [VersionedBookingV1, VersionedBookingV2] });
    const workflows = app.get(WorkflowService);

    const newest = await workflows.submit(VERSIONED_WORKFLOW, { guest: 'ada' });
    const first = await workflows.submit(VERSIONED_WORKFLOW, { guest: 'bob' }, { version: 1 });
    const second = await workflows.submit(VERSIONED_WORKFLOW, { guest: 'cy' }, { version: 2 });

    // Version 1 declares no version: its tasks store NULL, read as version 1.
    expect([newest.workflowVersion, first.workflowVersion, second.workflowVersion]).toEqual([2, null, 2]);
    const stored = await bed.db.client.query(`SELECT id, workflow_version FROM agent_tasks ORDER BY created_at`);
    expect(stored.rows.map((row) => row.workflow_version)).toEqual([2, null, 2]);
    expect((await workflows.get(newest.id))!.workflowVersion).toBe(2);
    const listed = await workflows.list({ workflowName: VERSIONED_WORKFLOW });
    expect(listed.items.map((task) => [task.id, task.workflowVersion]).sort()).toEqual(
      [
        [newest.id, 2],
        [first.id, null],
        [second.id, 2],
      ].sort(),
    );
  });

  it('takes the version of the functional form too, and records it through submitMany', async () => {
    const v1 = workflow('functional-versions', async () => ({ ranOn: 1 }));
    const v2 = workflow('functional-versions', async () => ({ ranOn: 2 }), { version: 2 });
    const app = await bed.start({ duraflow: { workflows: [v2, v1], worker: { pollIntervalMs: 20 } } });
    const workflows = app.get(WorkflowService);

    const many = await workflows.submitMany('functional-versions', [{}, {}]);
    const older = await workflows.submitMany('functional-versions', [{}], { version: 1 });
    expect([...many, ...older].map((task) => task.workflowVersion)).toEqual([2, 2, null]);
    for (const task of many) expect((await workflows.waitFor(task.id, { timeoutMs: 20_000 })).output).toEqual({ ranOn: 2 });
    expect((await workflows.waitFor(older[0].id, { timeoutMs: 20_000 })).output).toEqual({ ranOn: 1 });
  });

  it('refuses an unknown or malformed version with a typed error and writes nothing', async () => {
    const app = await bed.start({ duraflow: SUBMIT_ONLY, providers: [VersionedBookingV1, VersionedBookingV2] });
    const workflows = app.get(WorkflowService);

    const unknown = await workflows.submit(VERSIONED_WORKFLOW, { guest: 'ada' }, { version: 3 }).catch((error: unknown) => error);
    expect(unknown).toBeInstanceOf(UnknownWorkflowVersionError);
    expect(unknown).toMatchObject({
      code: 'UNKNOWN_WORKFLOW_VERSION',
      workflowName: VERSIONED_WORKFLOW,
      version: 3,
      registeredVersions: [1, 2],
    });
    await expect(workflows.submitMany(VERSIONED_WORKFLOW, [{ guest: 'x' }], { version: 7 })).rejects.toBeInstanceOf(
      UnknownWorkflowVersionError,
    );
    await expect(workflows.submit(VERSIONED_WORKFLOW, {}, { version: 1.5 })).rejects.toBeInstanceOf(InvalidSubmitOptionsError);
    await expect(workflows.submit(VERSIONED_WORKFLOW, {}, { version: '2' as never })).rejects.toBeInstanceOf(InvalidSubmitOptionsError);
    expect(await bed.rows.count('agent_tasks')).toBe(0);
  });

  it('refuses at boot two definitions of one name and version (no version and version 1 are the same version)', async () => {
    const error = await bed.bootFailure({
      duraflow: { ...SUBMIT_ONLY, workflows: [workflow(VERSIONED_WORKFLOW, async () => null, { version: 1 })] },
      providers: [VersionedBookingV1],
    });
    expect(error).toBeInstanceOf(DuplicateWorkflowError);
    const badVersion = await bed.bootFailure({
      duraflow: { ...SUBMIT_ONLY, workflows: [workflow('bad-version', async () => null, { version: 0 })] },
    });
    expect(badVersion).toMatchObject({ code: 'INVALID_WORKFLOW_DEFINITION' });
  });

  it('lets a worker claim only tasks of the versions it registers: old runs finish on old code, new runs on new code', async () => {
    const submitter = await bed.start({ duraflow: SUBMIT_ONLY, providers: [VersionedBookingV1, VersionedBookingV2] });
    const workflows = submitter.get(WorkflowService);
    const oldRuns = await Promise.all(['a', 'b', 'c'].map((guest) => workflows.submit(VERSIONED_WORKFLOW, { guest }, { version: 1 })));
    const newRuns = await Promise.all(['d', 'e', 'f'].map((guest) => workflows.submit(VERSIONED_WORKFLOW, { guest })));

    // The new deploy's worker registers version 2 only: it leaves the version 1 tasks alone.
    await bed.start({ duraflow: { worker: { pollIntervalMs: 20 } }, providers: [VersionedBookingV2] });
    for (const task of newRuns) {
      expect((await workflows.waitFor(task.id, { timeoutMs: 20_000 })).output).toEqual({
        ranOn: 2,
        room: `suite-for-${(task.input as { guest: string }).guest}`,
        breakfast: `breakfast-for-${(task.input as { guest: string }).guest}`,
      });
    }
    for (const task of oldRuns) expect((await workflows.get(task.id))!.status).toBe(TaskStatus.PENDING);

    // The old deploy's worker (version 1, declared by no version at all) takes them.
    await bed.start({ duraflow: { worker: { pollIntervalMs: 20 } }, providers: [VersionedBookingV1] });
    for (const task of oldRuns) {
      const done = await workflows.waitFor(task.id, { timeoutMs: 20_000 });
      expect(done.output).toEqual({ ranOn: 1, room: `room-for-${(task.input as { guest: string }).guest}` });
    }
    const steps = await bed.db.client.query(
      `SELECT t.workflow_version, array_agg(s.step_key ORDER BY s.completion_seq) AS keys
       FROM agent_tasks t JOIN step_runs s ON s.task_id = t.id GROUP BY t.id, t.workflow_version ORDER BY 1`,
    );
    expect(steps.rows.map((row) => [row.workflow_version, row.keys])).toEqual([
      ...newRuns.map(() => [2, ['reserve', 'add-breakfast']]),
      ...oldRuns.map(() => [null, ['reserve']]),
    ]);
  });
});
