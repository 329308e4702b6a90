import path from 'node:path';
import { TestingModule } from '@nestjs/testing';
import { TaskStatus, WorkflowService } from '@duraflow/nestjs';
import { readDeployStatus } from '../libs/duraflow/src/persistence/sql/read-deploy-status';
import { DEPLOY_TABLES_SQL, DeployEffects } from './fixtures/deploys/deploy-effects';
import type { DeployWorkerConfig } from './fixtures/deploys/deploy-worker-main';
import {
  PATCH_WORKFLOW,
  patchFlightWorkflow,
  ROLLING_WORKFLOW,
  RollingBookingV1,
  RollingBookingV2,
} from './fixtures/deploys/deploy-workflows';
import { SUBMIT_ONLY, useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';
import { stopAllWorkerProcesses, withWorkerOutputOnFailure, WorkerProcess } from './support/worker-process';

const ENTRY = path.join(__dirname, 'fixtures', 'deploys', 'deploy-worker-main.ts');
const TEST_TIMEOUT_MS = 120_000;

/*
 * Deploys with real worker processes: each process registers the code of one deploy, and is
 * started, killed (SIGKILL, a crash) and replaced as a rolling deploy does it. The processes'
 * own reapers (fast timings) recover the tasks of a killed one.
 */
describe('Safe deploys across worker processes', () => {
  const bed = useTestBed({ databasePerTest: true });
  let control: TestingModule;
  let workflows: WorkflowService;

  beforeEach(async () => {
    await bed.db.client.query(DEPLOY_TABLES_SQL);
    bed.closeLater({ close: stopAllWorkerProcesses });
    const effects = bed.closeLater(new DeployEffects(bed.db.url, 'test'), (opened) => opened.onApplicationShutdown());
    control = await bed.start({
      // No reaper here: the worker processes' own (fast) reapers recover the tasks of a killed one.
      duraflow: { ...SUBMIT_ONLY, reaper: { enabled: false }, workflows: [patchFlightWorkflow('patched', effects)] },
      providers: [{ provide: DeployEffects, useValue: effects }, RollingBookingV1, RollingBookingV2],
    });
    workflows = control.get(WorkflowService);
  });

  let started = 0;
  /** A worker process registering one deploy's code. */
  function startWorker(label: string, deploy: Pick<DeployWorkerConfig, 'versions' | 'patchCode'>): WorkerProcess {
    const config: DeployWorkerConfig = {
      databaseUrl: bed.db.url,
      ...deploy,
      duraflow: {
        workerId: `deploy-${label}-${++started}`,
        worker: { pollIntervalMs: 50, shutdownTimeoutMs: 1_000 },
        heartbeatIntervalMs: 100,
        reaper: { intervalMs: 200, staleAfterMs: 1_000 },
      },
    };
    return new WorkerProcess({ entry: ENTRY, config, label });
  }

  async function killed(worker: WorkerProcess): Promise<void> {
    worker.kill('SIGKILL');
    await worker.exited;
  }

  /** Which workers ran step `key` of task `id`, in order (a step runs again only when its worker died first). */
  async function ranBy(id: string, key: string): Promise<string[]> {
    const { rows } = await bed.db.client.query(`SELECT worker_id FROM deploy_effects WHERE task_id = $1 AND step_key = $2 ORDER BY id`, [
      id,
      key,
    ]);
    return rows.map((row) => row.worker_id);
  }

  async function openGate(name: string): Promise<void> {
    await bed.db.client.query(`INSERT INTO deploy_gates (name) VALUES ($1)`, [name]);
  }

  async function patchMarker(id: string): Promise<unknown> {
    const { rows } = await bed.db.client.query(`SELECT output FROM step_runs WHERE task_id = $1 AND step_key = 'patch:extra'`, [id]);
    return rows.length ? rows[0].output : undefined;
  }

  it(
    'rolls from version 1 to version 2: old runs finish on the old process, new runs start on the new one',
    withWorkerOutputOnFailure(async () => {
      const oldDeploy = startWorker('v1', { versions: [1], patchCode: 'original' });
      await oldDeploy.ready;
      const oldRuns = await Promise.all(['a', 'b'].map((guest) => workflows.submit(ROLLING_WORKFLOW, { guest }, { version: 1 })));
      // In flight: both started their first step on the old process, which holds them at a gate.
      for (const task of oldRuns)
        await eventually(`old run ${task.id} started`, async () => (await ranBy(task.id, 'reserve')).length === 1);

      const newDeploy = startWorker('v2', { versions: [2], patchCode: 'original' });
      await newDeploy.ready;
      const newRuns = await Promise.all(['c', 'd'].map((guest) => workflows.submit(ROLLING_WORKFLOW, { guest })));
      expect(newRuns.map((task) => task.workflowVersion)).toEqual([2, 2]);
      for (const task of newRuns) {
        const done = await workflows.waitFor(task.id, { timeoutMs: 30_000 });
        expect(done.output).toEqual({ ranOn: 2, room: `suite-for-${(task.input as { guest: string }).guest}`, breakfast: true });
        expect(await ranBy(task.id, 'reserve')).toEqual([newDeploy.workerId]);
      }
      // What `duraflow status` shows: version 1 still has its two runs, so the old code must stay.
      const during = await readDeployStatus(bed.db.client);
      expect(during.unfinishedByVersion).toEqual([{ workflowName: ROLLING_WORKFLOW, version: 1, pending: 0, running: 2, held: 0 }]);

      await openGate('old-runs');
      for (const task of oldRuns) {
        const done = await workflows.waitFor(task.id, { timeoutMs: 30_000 });
        expect(done).toMatchObject({ status: TaskStatus.COMPLETED, workflowVersion: null, workerId: oldDeploy.workerId });
        expect(done.output).toEqual({ ranOn: 1, room: `room-for-${(task.input as { guest: string }).guest}` });
        expect(await ranBy(task.id, 'reserve')).toEqual([oldDeploy.workerId]);
      }
      expect((await readDeployStatus(bed.db.client)).unfinishedByVersion).toEqual([]);
    }),
    TEST_TIMEOUT_MS,
  );

  it(
    'leaves a version 1 run whose process died to a process that registers version 1, never to a version 2 one',
    withWorkerOutputOnFailure(async () => {
      const oldDeploy = startWorker('v1', { versions: [1], patchCode: 'original' });
      await oldDeploy.ready;
      const oldRun = await workflows.submit(ROLLING_WORKFLOW, { guest: 'a' }, { version: 1 });
      await eventually('the old run started', async () => (await ranBy(oldRun.id, 'reserve')).length === 1);
      await killed(oldDeploy);

      // Only version 2 is deployed: its reaper recovers the task, its worker never claims it.
      const newDeploy = startWorker('v2', { versions: [2], patchCode: 'original' });
      await newDeploy.ready;
      await eventually('the dead run is pending again', async () => (await bed.rows.task(oldRun.id)).status === 'pending');
      await openGate('old-runs');
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect((await bed.rows.task(oldRun.id)).status).toBe('pending');
      expect((await readDeployStatus(bed.db.client)).unfinishedByVersion).toEqual([
        { workflowName: ROLLING_WORKFLOW, version: 1, pending: 1, running: 0, held: 0 },
      ]);

      const keepsOld = startWorker('v1-and-v2', { versions: [1, 2], patchCode: 'original' });
      const done = await workflows.waitFor(oldRun.id, { timeoutMs: 30_000 });
      expect(done.output).toEqual({ ranOn: 1, room: 'room-for-a' });
      expect(await ranBy(oldRun.id, 'reserve')).toEqual([oldDeploy.workerId, keepsOld.workerId]);
    }),
    TEST_TIMEOUT_MS,
  );

  it(
    'answers ctx.patched for runs in flight when the patch was deployed: false past it, true before it and for new runs, the same after another crash',
    withWorkerOutputOnFailure(async () => {
      const oldDeploy = startWorker('original', { versions: [1], patchCode: 'original' });
      await oldDeploy.ready;
      // pastPatch recorded A and B (the patch goes between them) and is stuck in C; beforePatch recorded A and is stuck in B.
      const pastPatch = await workflows.submit(PATCH_WORKFLOW, { blockAt: 'C' });
      const beforePatch = await workflows.submit(PATCH_WORKFLOW, { blockAt: 'B' });
      await eventually(
        'both stuck',
        async () => (await ranBy(pastPatch.id, 'C')).length === 1 && (await ranBy(beforePatch.id, 'B')).length === 1,
      );
      await killed(oldDeploy);

      const patched = startWorker('patched', { versions: [1], patchCode: 'patched' });
      await patched.ready;
      const fresh = await workflows.submit(PATCH_WORKFLOW, {});
      expect((await workflows.waitFor(fresh.id, { timeoutMs: 30_000 })).output).toEqual(['A-done', 'X-done', 'B-done', 'C-done']);
      expect(await patchMarker(fresh.id)).toBe(true);
      // Recovered on the patched code, each is stuck again at its gate, its answer recorded.
      await eventually(
        'both recovered',
        async () => (await ranBy(pastPatch.id, 'C')).length === 2 && (await ranBy(beforePatch.id, 'B')).length === 2,
      );
      expect(await patchMarker(pastPatch.id)).toBe(false);
      expect(await patchMarker(beforePatch.id)).toBe(true);
      expect(await ranBy(pastPatch.id, 'X')).toEqual([]);
      expect(await ranBy(beforePatch.id, 'X')).toEqual([patched.workerId]);
      const status = await readDeployStatus(bed.db.client);
      expect(status.patchesRecordedFalse).toEqual([{ workflowName: PATCH_WORKFLOW, patchId: 'extra', unfinishedTasks: 1 }]);

      // Another crash: beforePatch is now replaying X, recorded after the patch, yet its answer stays true.
      await killed(patched);
      await openGate('blocked');
      const recovered = startWorker('patched-again', { versions: [1], patchCode: 'patched' });
      const past = await workflows.waitFor(pastPatch.id, { timeoutMs: 30_000 });
      const before = await workflows.waitFor(beforePatch.id, { timeoutMs: 30_000 });
      expect(past.output).toEqual(['A-done', 'B-done', 'C-done']);
      expect(before.output).toEqual(['A-done', 'X-done', 'B-done', 'C-done']);
      expect([await patchMarker(pastPatch.id), await patchMarker(beforePatch.id)]).toEqual([false, true]);
      expect(await ranBy(beforePatch.id, 'X')).toEqual([patched.workerId]);
      expect(await ranBy(beforePatch.id, 'B')).toEqual([oldDeploy.workerId, patched.workerId, recovered.workerId]);
      expect(await ranBy(pastPatch.id, 'B')).toEqual([oldDeploy.workerId]);
      expect((await readDeployStatus(bed.db.client)).patchesRecordedFalse).toEqual([]);
    }),
    TEST_TIMEOUT_MS,
  );

  it(
    'holds the runs a deploy with reordered steps would take down another path, without running or undoing anything, until resumed on fixed code',
    withWorkerOutputOnFailure(async () => {
      const oldDeploy = startWorker('original', { versions: [1], patchCode: 'original' });
      await oldDeploy.ready;
      const inFlight = await workflows.submit(PATCH_WORKFLOW, { blockAt: 'C' });
      await eventually('stuck in C', async () => (await ranBy(inFlight.id, 'C')).length === 1);
      await killed(oldDeploy);

      const buggy = startWorker('reordered', { versions: [1], patchCode: 'reordered' });
      await buggy.ready;
      const held = await eventually('held', async () => {
        const task = await workflows.get(inFlight.id);
        return task?.heldAt ? task : undefined;
      });
      expect(held).toMatchObject({ status: TaskStatus.PENDING, workerId: null });
      expect(held!.error).toMatchObject({ code: 'NON_DETERMINISM', recordedStep: 'B', requestedStep: 'C' });
      expect(await buggy.call('WorkerService', 'stats')).toMatchObject({ held: 1 });
      // Nothing of the buggy code ran: C ran once, on the old process; no compensation, no failure.
      expect(await ranBy(inFlight.id, 'C')).toEqual([oldDeploy.workerId]);
      expect(await bed.rows.completedStepKeys(inFlight.id)).toEqual(['A', 'B']);
      expect((await readDeployStatus(bed.db.client)).unfinishedByVersion).toEqual([
        { workflowName: PATCH_WORKFLOW, version: 1, pending: 0, running: 0, held: 1 },
      ]);

      // The fixed deploy, then resume.
      await killed(buggy);
      await openGate('blocked');
      const fixed = startWorker('fixed', { versions: [1], patchCode: 'original' });
      await fixed.ready;
      await workflows.resume(inFlight.id);
      const done = await workflows.waitFor(inFlight.id, { timeoutMs: 30_000 });
      expect(done.output).toEqual(['A-done', 'B-done', 'C-done']);
      expect(await ranBy(inFlight.id, 'C')).toEqual([oldDeploy.workerId, fixed.workerId]);
    }),
    TEST_TIMEOUT_MS,
  );
});
