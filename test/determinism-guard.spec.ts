import { TestingModule } from '@nestjs/testing';
import { NonDeterminismError, TaskNotFoundError, TaskNotHeldError, TaskStatus, WorkerService, WorkflowService } from '@duraflow/nestjs';
import { DeployedCode, deployed, GUARDED_WORKFLOW, guardedWorkflow, resetDeployed } from './fixtures/deploys/deployed-code';
import { insertCrashedRun, RecordedStepRow } from './fixtures/deploys/crashed-runs';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

describe('The determinism guard', () => {
  const bed = useTestBed({ databasePerTest: true });

  /** A run that crashed after recording `steps` on the original code (fixtures/deploys/crashed-runs.ts). */
  function crashedRun(steps: RecordedStepRow[]): Promise<string> {
    return insertCrashedRun(bed.db.client, steps);
  }

  /** A worker on `code`, the crashed runs' recovery. */
  async function deploy(code: DeployedCode): Promise<TestingModule> {
    resetDeployed(code);
    return bed.start({ duraflow: { workflows: [guardedWorkflow], worker: { pollIntervalMs: 20 } } });
  }

  async function heldTask(app: TestingModule, id: string) {
    const task = await eventually(`task ${id} is held`, async () => {
      const found = await app.get(WorkflowService).get(id);
      return found?.heldAt ? found : undefined;
    });
    return task!;
  }

  async function stepKeys(id: string): Promise<string[]> {
    return bed.rows.completedStepKeys(id);
  }

  it('holds a run whose code moved a new step before a recorded one: nothing new runs, nothing is undone, then resume runs it on fixed code', async () => {
    const id = await crashedRun(['A', 'B']);
    const app = await deploy('reordered');

    const held = await heldTask(app, id);
    expect(held.status).toBe(TaskStatus.PENDING);
    expect(held.error).toMatchObject({ code: 'NON_DETERMINISM', name: 'NonDeterminismError', recordedStep: 'B', requestedStep: 'C' });
    expect(held.error!.message).toContain('workflows.resume');
    expect(held.workerId).toBeNull();
    expect(deployed.ran).toEqual([]); // no step body, no compensation
    expect(await stepKeys(id)).toEqual(['A', 'B']);
    expect(await bed.rows.compensatedStepKeys(id)).toEqual([]);
    expect(app.get(WorkerService).stats()).toMatchObject({ held: 1, failed: 0, rolledBack: 0 });
    // The claim passes it over while it is held.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await bed.rows.task(id)).status).toBe('pending');
    expect(deployed.ran).toEqual([]);

    // The fix: the original order again. Resume clears the hold and the error.
    deployed.code = 'original';
    const resumed = await app.get(WorkflowService).resume(id);
    expect(resumed).toMatchObject({ id, status: TaskStatus.PENDING, heldAt: null, error: null });
    const done = await app.get(WorkflowService).waitFor(id, { timeoutMs: 20_000 });
    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(done.output).toEqual(['A-done', 'B-done', 'C-done']);
    expect(deployed.ran).toEqual(['C']);
    expect(await stepKeys(id)).toEqual(['A', 'B', 'C']);
  });

  it('holds a run whose code renamed a recorded step, visible through get and list with the two steps named, and resumed after the fix', async () => {
    const id = await crashedRun(['A', 'B']);
    const app = await deploy('renamed');
    const workflows = app.get(WorkflowService);

    const held = await heldTask(app, id);
    expect(held.error).toMatchObject({ code: 'NON_DETERMINISM', recordedStep: 'B', requestedStep: 'B2' });
    expect(held.error!.message).toContain('"B2"');
    const listed = await workflows.list({ status: TaskStatus.PENDING });
    expect(listed.items.map((task) => [task.id, (task.error as { code?: string } | null)?.code, task.heldAt !== null])).toEqual([
      [id, 'NON_DETERMINISM', true],
    ]);
    expect(deployed.ran).toEqual([]);

    // A resume before the fix: the guard holds it again, still without running anything.
    await workflows.resume(id);
    await eventually('held again', async () => (await bed.rows.task(id)).held_at !== null && (await bed.rows.task(id)).error !== null);
    expect(deployed.ran).toEqual([]);

    deployed.code = 'original';
    await workflows.resume(id);
    const done = await workflows.waitFor(id, { timeoutMs: 20_000 });
    expect(done.output).toEqual(['A-done', 'B-done', 'C-done']);
    expect(deployed.ran).toEqual(['C']);
  });

  it('holds a run that returns without asking for a recorded step (a removed step), naming no requested step', async () => {
    const id = await crashedRun(['A', 'B', 'C']);
    const app = await deploy('without-b');

    const held = await heldTask(app, id);
    expect(held.error).toMatchObject({ code: 'NON_DETERMINISM', recordedStep: 'B', requestedStep: null });
    expect(held.status).toBe(TaskStatus.PENDING);
    expect(held.output).toBeNull();
    expect(deployed.ran).toEqual([]);
  });

  it('does not trip on steps started together (Promise.all), whichever of them the crashed run recorded', async () => {
    // The second of the group recorded, the first not: the new step is asked for before the recorded one.
    const second = await crashedRun(['A', 'C']);
    const app = await deploy('together');
    const done = await app.get(WorkflowService).waitFor(second, { timeoutMs: 20_000 });
    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(done.output).toEqual(['A-done', 'B-done', 'C-done', 'D-done']);
    expect(deployed.ran.sort()).toEqual(['B', 'D']);
    expect(app.get(WorkerService).stats()).toMatchObject({ held: 0 });
  });

  it('does not trip when a recorded step of the group is asked for after another memoized step', async () => {
    const id = await crashedRun(['A', 'A2', 'C']);
    const app = await deploy('together-after-memo');
    const done = await app.get(WorkflowService).waitFor(id, { timeoutMs: 20_000 });
    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(deployed.ran.sort()).toEqual(['B', 'D']);
  });

  it('lets a held task be cancelled, its recorded steps undone with compensate: true', async () => {
    const id = await crashedRun(['A', 'B']);
    const app = await deploy('renamed');
    await heldTask(app, id);
    const cancelled = await app.get(WorkflowService).cancel(id, { compensate: true });
    expect(cancelled.status).toBe(TaskStatus.CANCELLED);
    expect(deployed.ran).toEqual(['undo-B', 'undo-A']);
    expect((await bed.rows.compensatedStepKeys(id)).sort()).toEqual(['A', 'B']);
  });

  it('refuses to resume a task it does not hold', async () => {
    const id = await crashedRun([]);
    const app = await deploy('original');
    const workflows = app.get(WorkflowService);
    await workflows.waitFor(id, { timeoutMs: 20_000 });
    await expect(workflows.resume(id)).rejects.toMatchObject({ code: 'TASK_NOT_HELD', status: 'completed' });
    await expect(workflows.resume(id)).rejects.toBeInstanceOf(TaskNotHeldError);
    await expect(workflows.resume('00000000-0000-4000-8000-000000000000')).rejects.toBeInstanceOf(TaskNotFoundError);
  });

  it('is a typed error with a stable code naming both steps', () => {
    const error = new NonDeterminismError('t-1', 'w', 'B', 'C');
    expect(error).toMatchObject({ code: 'NON_DETERMINISM', recordedStep: 'B', requestedStep: 'C', taskId: 't-1' });
    expect(JSON.parse(JSON.stringify(error))).toMatchObject({ code: 'NON_DETERMINISM', recordedStep: 'B', requestedStep: 'C' });
  });

  describe('ctx.patched', () => {
    it('is false for a run already past the patch, true for one that reaches it new, and recorded as step patch:<id>', async () => {
      const past = await crashedRun(['A', 'B']);
      const app = await deploy('patched');
      const workflows = app.get(WorkflowService);

      const pastDone = await workflows.waitFor(past, { timeoutMs: 20_000 });
      expect(pastDone.output).toEqual(['A-done', 'B-done', 'C-done']);
      expect(deployed.ran).toEqual(['C']);
      expect((await bed.rows.step(past, 'patch:extra')).output).toBe(false);

      resetDeployed('patched');
      const fresh = await workflows.submit(GUARDED_WORKFLOW, {});
      const freshDone = await workflows.waitFor(fresh.id, { timeoutMs: 20_000 });
      expect(freshDone.output).toEqual(['A-done', 'X-done', 'B-done', 'C-done']);
      expect(deployed.ran).toEqual(['A', 'X', 'B', 'C']);
      expect((await bed.rows.step(fresh.id, 'patch:extra')).output).toBe(true);
    });

    it('keeps its recorded answer after a crash, though the run is replaying the steps it took after the patch', async () => {
      // The run answered true, took the new branch (X), and crashed: X is recorded after the patch.
      const id = await crashedRun(['A', { key: 'patch:extra', output: true }, 'X']);
      const app = await deploy('patched');
      const done = await app.get(WorkflowService).waitFor(id, { timeoutMs: 20_000 });
      expect(done.output).toEqual(['A-done', 'X-done', 'B-done', 'C-done']);
      expect(deployed.patchAnswers).toEqual([true]);
      expect(deployed.ran).toEqual(['B', 'C']);
    });

    it('holds, once the patch is retired, a run that recorded it as false', async () => {
      const oldBranch = await crashedRun(['A', { key: 'patch:extra', output: false }, 'B']);
      const newBranch = await crashedRun(['A', { key: 'patch:extra', output: true }, 'X']);
      const app = await deploy('patch-retired');
      const held = await heldTask(app, oldBranch);
      expect(held.error).toMatchObject({ code: 'NON_DETERMINISM', recordedStep: 'patch:extra', requestedStep: 'patch:extra (deprecated)' });
      expect(held.error!.message).toContain('retired the patch (ctx.deprecatePatch)');
      const done = await app.get(WorkflowService).waitFor(newBranch, { timeoutMs: 20_000 });
      expect(done.output).toEqual(['A-done', 'X-done', 'B-done', 'C-done']);
      expect(deployed.ran.sort()).toEqual(['B', 'C']);
    });
  });
});
