import { TaskStatus, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { useTestBed } from './support/test-bed';

const v1 = workflow('limited-later', async (ctx: WorkflowContext) => ctx.step.run('s', () => 'v1'));
const v2 = workflow('limited-later', async (ctx: WorkflowContext) => ctx.step.run('s', () => 'v2'), { version: 2, concurrency: 1 });

describe('versions and flow control', () => {
  const bed = useTestBed();
  it('runs a task submitted on version 1 (no limits) of a workflow whose newest version is limited', async () => {
    const app = await bed.start({ duraflow: { workflows: [v1, v2], worker: { pollIntervalMs: 20 } } });
    const workflows = app.get(WorkflowService);
    const newest = await workflows.submit('limited-later', {});
    const older = await workflows.submit('limited-later', {}, { version: 1 });
    expect((await workflows.waitFor(newest.id, { timeoutMs: 10_000 })).output).toBe('v2');
    const row = await bed.rows.task(older.id);
    console.log(
      JSON.stringify({
        key: row.concurrency_key,
        version: row.workflow_version,
        newestKey: (await bed.rows.task(newest.id)).concurrency_key,
      }),
    );
    const done = await workflows.waitFor(older.id, { timeoutMs: 5_000 }).catch((error: Error) => error);
    console.log(done instanceof Error ? done.message : done.status);
    expect(done).toMatchObject({ status: TaskStatus.COMPLETED, output: 'v1' }); // fails today: WaitForTimeoutError, the task stays pending
  });
});
