import { ChildWorkflowFailedError, SignalTimeoutError, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { replayCheck } from '@duraflow/nestjs/replay';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/** A recorded failed outcome of a primitive (a signal's timeout, a child's failure) is a recorded step too. */
let inserted = false;
let ran: string[] = [];
const failingLeaf = workflow('failing-leaf', async () => {
  throw new Error('leaf broke');
});
const failedWaits = workflow('failed-waits', async (ctx: WorkflowContext<{ kind: 'signal' | 'child' }>) => {
  await ctx.step.run('a', () => ran.push('a'));
  if (inserted) await ctx.step.run('pre', () => ran.push('pre'));
  try {
    if (ctx.input.kind === 'signal') await ctx.waitForSignal('late', { timeoutMs: 50 });
    else await ctx.runChild('breaks', 'failing-leaf', {});
  } catch (error) {
    if (!(error instanceof SignalTimeoutError) && !(error instanceof ChildWorkflowFailedError)) throw error;
  }
  return ctx.waitForSignal('go');
});

describe('the determinism guard over failed waits', () => {
  const bed = useTestBed({ databasePerTest: true });

  it.each([
    ['signal', 'signal:late#1'],
    ['child', 'breaks'],
  ] as const)('holds a recovered run whose new code inserts a step before a recorded failed %s wait', async (kind, failedKey) => {
    inserted = false;
    const options = { duraflow: { workflows: [failedWaits, failingLeaf], worker: { pollIntervalMs: 20 } } };
    const first = await bed.start(options);
    const task = await first.get(WorkflowService).submit('failed-waits', { kind });
    await eventually('waits for go', async () =>
      (await bed.rows.steps(task.id)).some((step) => step.step_key === 'signal:go#1' && step.status === 'waiting'),
    );
    expect((await bed.rows.step(task.id, failedKey)).status).toBe('failed');
    await bed.close(first);

    inserted = true;
    ran = [];
    const report = await replayCheck({
      workflows: [failedWaits, failingLeaf],
      databaseUrl: bed.db.url,
      query: { workflowNames: ['failed-waits'] },
    });
    expect(report.diverged.map((run) => [run.recordedStep, run.requestedStep])).toEqual([[failedKey, 'pre']]);

    const second = await bed.start(options);
    await second.get(WorkflowService).signal(task.id, 'go', {});
    await eventually('held or completed', async () => {
      const row = await bed.rows.task(task.id);
      return row.held_at !== null || row.status === 'completed';
    });
    const row = await bed.rows.task(task.id);
    expect(ran).toEqual([]); // fails today: ['pre'], the new step ran, and the task completed
    expect(row.error).toMatchObject({ code: 'NON_DETERMINISM', recordedStep: failedKey, requestedStep: 'pre' });
  });
});
