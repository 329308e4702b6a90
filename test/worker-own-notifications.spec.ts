import { TestingModule } from '@nestjs/testing';
import { TaskStatus, WorkerService, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { TaskLease } from '../libs/duraflow/src/lease/task-lease';
import { TaskNotifications } from '../libs/duraflow/src/notifications/task-notifications';
import { TaskTransitions } from '../libs/duraflow/src/persistence/lifecycle/task-transitions';
import { useTestBed } from './support/test-bed';

/*
 * A run's final status is sent on the task-finished channel, which also carries cancels. The
 * worker that wrote it must not take it for a cancel of the run that is still recording it.
 * Each test holds the final write's reply until its NOTIFY has reached the process, so the
 * worker hears it while the run is still its own.
 */
describe('A worker hearing its own final status', () => {
  const bed = useTestBed({ databasePerTest: true });
  let app: TestingModule;
  let stops: jest.SpyInstance;

  const quick = workflow('quick', async (ctx: WorkflowContext<{ n: number }>) => ctx.input.n);
  const undone = workflow(
    'undone',
    async (ctx: WorkflowContext) => {
      await ctx.step.run('book', () => ({ booking: 'b_1' }));
      await ctx.step.run('pay', () => {
        throw new Error('card declined');
      });
    },
    { compensations: { book: () => undefined } },
  );

  beforeEach(async () => {
    app = await bed.start({ duraflow: { workflows: [quick, undone], worker: { enabled: false } } });
    stops = jest.spyOn(TaskLease.prototype, 'stop');
  });

  afterEach(() => stops.mockRestore());

  /** Resolves once the task-finished NOTIFY of every id in `ids` reached this process. */
  function heard(ids: string[]): Promise<void> {
    const notifications = app.get(TaskNotifications, { strict: false });
    const waiting = new Set(ids);
    return new Promise<void>((resolve) => {
      const unsubscribe = notifications.onFinished((id) => {
        waiting.delete(id);
        if (waiting.size) return;
        unsubscribe();
        resolve();
      });
    });
  }

  /** Runs one task of `name` to its end; the worker is stopped after, so its counts are final. */
  async function run(name: string): Promise<TaskStatus> {
    const workflows = app.get(WorkflowService);
    const worker = app.get(WorkerService);
    const task = await workflows.submit(name, { n: 1 });
    await worker.start();
    const { status } = await workflows.waitFor(task.id, { timeoutMs: 15_000 });
    await worker.stop();
    return status;
  }

  it('does not take the NOTIFY of its own completion for a cancel', async () => {
    const tasks = app.get(TaskTransitions, { strict: false });
    const complete = tasks.complete.bind(tasks);
    jest.spyOn(tasks, 'complete').mockImplementation(async (ids, ...rest) => {
      const notified = heard(ids);
      const done = await complete(ids, ...rest);
      await notified;
      return done;
    });

    expect(await run('quick')).toBe(TaskStatus.COMPLETED);

    expect(stops).not.toHaveBeenCalled();
    expect(app.get(WorkerService).stats()).toMatchObject({ completed: 1, stopped: 0 });
  });

  it('does not take the NOTIFY of its own rollback’s end for a cancel', async () => {
    const tasks = app.get(TaskTransitions, { strict: false });
    const finish = tasks.finishRollback.bind(tasks);
    jest.spyOn(tasks, 'finishRollback').mockImplementation(async (id, ...rest) => {
      const notified = heard([id]);
      const status = await finish(id, ...rest);
      await notified;
      return status;
    });

    expect(await run('undone')).toBe(TaskStatus.ROLLED_BACK);

    expect(stops).not.toHaveBeenCalled();
    expect(app.get(WorkerService).stats()).toMatchObject({ rolledBack: 1, stopped: 0 });
  });
});
