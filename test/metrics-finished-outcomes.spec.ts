import { Registry } from 'prom-client';
import { TaskStatus, WorkerService, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { deployed, guardedWorkflow, resetDeployed } from './fixtures/deploys/deployed-code';
import { insertCrashedRun } from './fixtures/deploys/crashed-runs';
import { brokenWorkflow, checkoutWorkflow, holdWorkflow, quickWorkflow } from './fixtures/observability/workflows';
import { sampleValue } from './support/prometheus';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * `duraflow_tasks_finished_total` counts a task once, when it reaches a terminal status, with
 * that status as its outcome. The runs that leave a task unfinished (one that suspends at a sleep,
 * a signal or a child wait, one the determinism guard holds, one stopped by a cancel) are counted
 * in `duraflow_runs_total` only.
 */

/** Sleeps, waits for the `go` signal, then runs a `quick` child and waits for it. */
const patientWorkflow = workflow('patient', async (ctx: WorkflowContext) => {
  await ctx.sleep('nap', 500);
  await ctx.waitForSignal('go');
  return ctx.runChild('child', 'quick', {});
});

/** Every `outcome` label value of `duraflow_tasks_finished_total` in an exposition. */
function finishedOutcomes(exposition: string): string[] {
  const outcomes = [...exposition.matchAll(/^duraflow_tasks_finished_total\{[^}]*outcome="([^"]*)"[^}]*\}/gm)].map((match) => match[1]);
  return [...new Set(outcomes)].sort();
}

describe('duraflow_tasks_finished_total', () => {
  const bed = useTestBed({ databasePerTest: true });

  async function startWithMetrics() {
    const registry = new Registry();
    const app = await bed.start({
      duraflow: {
        workflows: [quickWorkflow, checkoutWorkflow(), brokenWorkflow, holdWorkflow, patientWorkflow, guardedWorkflow],
        metrics: { registry },
      },
    });
    return { app, workflows: app.get(WorkflowService), scrape: () => registry.metrics() };
  }

  const finished = (exposition: string, workflow: string, outcome: string) =>
    sampleValue(exposition, 'duraflow_tasks_finished_total', { workflow, outcome });
  const runs = (exposition: string, workflow: string, outcome: string) =>
    sampleValue(exposition, 'duraflow_runs_total', { workflow, outcome }) ?? 0;

  it.each([
    ['completed', 'quick', {}],
    ['completed', 'checkout', {}],
    ['failed', 'broken', {}],
    ['rolled_back', 'checkout', { decline: true }],
    ['partial_rollback', 'checkout', { decline: true, seatUndoFails: true }],
  ])('counts a task that ended %s once, under that outcome (%s)', async (outcome, name, input) => {
    const { workflows, scrape } = await startWithMetrics();
    const task = await workflows.waitFor((await workflows.submit(name, input)).id);
    expect(task.status).toBe(outcome);
    const text = await eventually('the task is counted', scrape, { until: (exposition) => finished(exposition, name, outcome) === 1 });
    expect(finishedOutcomes(text)).toEqual([outcome]);
  });

  it('counts a task cancelled with compensation once, as cancelled, and the run its cancel stopped not at all', async () => {
    const { workflows, scrape } = await startWithMetrics();
    const { id } = await workflows.submit('hold', {});
    await eventually('the task waits in its second step', async () => (await bed.rows.completedStepKeys(id)).includes('reserve'));

    const cancelled = await workflows.cancel(id, { compensate: true });
    expect(cancelled.status).toBe(TaskStatus.CANCELLED);
    const text = await eventually('the stopped run is counted', scrape, {
      until: (exposition) => runs(exposition, 'hold', 'stopped') === 1,
    });
    expect(finished(text, 'hold', 'cancelled')).toBe(1);
    expect(finishedOutcomes(text)).toEqual(['cancelled']);
  });

  it('counts a task that slept, waited for a signal and for a child once, when it completed, never at a suspension', async () => {
    const { workflows, scrape } = await startWithMetrics();
    const { id } = await workflows.submit('patient', {});
    await eventually('the task waits for its signal', async () => (await bed.rows.completedStepKeys(id)).includes('nap'));
    await eventually('the run that reached the wait is counted', scrape, {
      until: (exposition) => runs(exposition, 'patient', 'suspended') >= 2,
    });
    expect(finishedOutcomes(await scrape())).toEqual([]);

    await workflows.signal(id, 'go', {});
    expect((await workflows.waitFor(id)).status).toBe(TaskStatus.COMPLETED);
    const text = await eventually('the task is counted', scrape, {
      until: (exposition) => finished(exposition, 'patient', 'completed') === 1,
    });
    // The sleep and the signal wait each suspended a run (the child's wait may too); one run completed.
    expect(runs(text, 'patient', 'suspended')).toBeGreaterThanOrEqual(2);
    expect(runs(text, 'patient', 'completed')).toBe(1);
    expect(finished(text, 'quick', 'completed')).toBe(1);
    expect(finished(text, 'patient', 'suspended')).toBeUndefined();
    expect(finishedOutcomes(text)).toEqual(['completed']);
  });

  it('does not count a task the determinism guard held, and counts it once it completes after a resume', async () => {
    const id = await insertCrashedRun(bed.db.client, ['A', 'B']);
    resetDeployed('reordered');
    const { app, workflows, scrape } = await startWithMetrics();
    await eventually('the task is held', async () => (await workflows.get(id))?.heldAt);
    expect(app.get(WorkerService).stats()).toMatchObject({ held: 1 });
    const held = await eventually('the held run is counted', scrape, {
      until: (exposition) => runs(exposition, 'guarded-trip', 'held') === 1,
    });
    expect(finishedOutcomes(held)).toEqual([]);

    deployed.code = 'original';
    await workflows.resume(id);
    expect((await workflows.waitFor(id)).status).toBe(TaskStatus.COMPLETED);
    const text = await eventually('the task is counted', scrape, {
      until: (exposition) => finished(exposition, 'guarded-trip', 'completed') === 1,
    });
    expect(finished(text, 'guarded-trip', 'held')).toBeUndefined();
    expect(finishedOutcomes(text)).toEqual(['completed']);
  });
});
