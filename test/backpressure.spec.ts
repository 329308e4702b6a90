import { TaskStatus, WorkerService, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { StepBarrier } from './fixtures/steps/barrier';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/** Blocks the event loop for `ms`, as a CPU-bound handler in the host app would. */
function blockEventLoop(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // busy
  }
}

describe('Backpressure (seed 001)', () => {
  const bed = useTestBed({ databasePerTest: true });

  it('stops polling while the tasks held reach maxQueuedTasks, and resumes as they finish', async () => {
    const barrier = new StepBarrier();
    const held = workflow('held', async (ctx: WorkflowContext) => {
      await ctx.step.run('wait', () => barrier.pass());
      return ctx.runId;
    });
    const app = await bed.start({
      duraflow: { workflows: [held], worker: { concurrency: 10, backpressure: { maxQueuedTasks: 3 } } },
    });
    const worker = app.get(WorkerService);
    const workflows = app.get(WorkflowService);
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push((await workflows.submit('held', {})).id);

    await eventually('three tasks run', () => barrier.waiting === 3);
    await eventually('the queue is reported full', () => worker.stats().backpressure.queueFull);
    expect(worker.stats().backpressure).toMatchObject({ queued: 3, maxQueued: 3, queueFull: true });
    expect(await bed.rows.countByStatus()).toEqual({ running: 3, pending: 4 });

    barrier.releaseOne();
    await eventually('a fourth task took the freed place', () => barrier.waiting === 3 && barrier.entered === 4);
    expect(await bed.rows.countByStatus()).toEqual({ running: 3, pending: 3, completed: 1 });

    barrier.open();
    for (const id of ids) expect((await workflows.waitFor(id)).status).toBe(TaskStatus.COMPLETED);
    await eventually('the queue is no longer full', () => !worker.stats().backpressure.queueFull);
    expect(barrier.maxInFlight).toBe(3);
  });

  it('polls less often while the event loop lags past maxEventLoopLagMs, measured per window', async () => {
    const quick = workflow('quick', async () => 'done');
    const app = await bed.start({
      duraflow: {
        workflows: [quick],
        worker: { pollIntervalMs: 50, backpressure: { maxEventLoopLagMs: 80, lagWindowMs: 200, slowdownFactor: 6 } },
      },
    });
    const worker = app.get(WorkerService);
    await eventually('a first window was measured', () => worker.stats().backpressure.eventLoopLagMs > 0);
    expect(worker.stats().backpressure).toMatchObject({ lagging: false, pollIntervalMs: 50 });

    // A host that hogs the loop: 150 ms blocks, again and again, for a few windows.
    const hog = setInterval(() => blockEventLoop(150), 10);
    try {
      await eventually('the worker saw the lag', () => worker.stats().backpressure.lagging);
      const stats = worker.stats().backpressure;
      expect(stats.eventLoopLagMs).toBeGreaterThan(80);
      expect(stats.pollIntervalMs).toBe(300);
    } finally {
      clearInterval(hog);
    }

    // Lag is judged per window: once the loop is free again, polling is back to normal.
    await eventually('the lag is over', () => !worker.stats().backpressure.lagging);
    expect(worker.stats().backpressure.pollIntervalMs).toBe(50);
    const task = await app.get(WorkflowService).submit('quick', {});
    expect((await app.get(WorkflowService).waitFor(task.id)).status).toBe(TaskStatus.COMPLETED);
  });
});
