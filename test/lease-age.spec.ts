import { InvalidDuraflowOptionsError, TaskStatus, WorkerService, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { resolveDuraflowOptions } from '../libs/duraflow/src/config/resolved-options';
import { TaskTransitions } from '../libs/duraflow/src/persistence/lifecycle/task-transitions';
import { useTestBed } from './support/test-bed';
import { eventually, sleep } from './support/waiting';

/**
 * A lease's age (issue 14), in one process: the run confirms an old lease before user code, and
 * a fresh one costs no statement. The real-process cases (a frozen or blocked worker) are in
 * chaos-lease-expiry.spec.ts.
 */
describe('the lease age of a run', () => {
  const bed = useTestBed({ databasePerTest: true });

  describe('worker.leaseConfirmAfterMs', () => {
    it('defaults to a third of reaper.staleAfterMs, and takes a value below it', () => {
      expect(resolveDuraflowOptions({}).worker.leaseConfirmAfterMs).toBe(10_000);
      expect(resolveDuraflowOptions({ reaper: { staleAfterMs: 1_000 } }).worker.leaseConfirmAfterMs).toBe(333);
      expect(resolveDuraflowOptions({ worker: { leaseConfirmAfterMs: 0 } }).worker.leaseConfirmAfterMs).toBe(0);
      expect(resolveDuraflowOptions({ worker: { leaseConfirmAfterMs: 29_999 } }).worker.leaseConfirmAfterMs).toBe(29_999);
    });

    it('rejects a value that is not a whole number >= 0, or not below reaper.staleAfterMs, with a typed error', () => {
      for (const leaseConfirmAfterMs of [-1, 1.5, '100' as never]) {
        expect(() => resolveDuraflowOptions({ worker: { leaseConfirmAfterMs } })).toThrow(InvalidDuraflowOptionsError);
      }
      expect(() => resolveDuraflowOptions({ worker: { leaseConfirmAfterMs: 30_000 } })).toThrow(
        /worker\.leaseConfirmAfterMs.*less than reaper\.staleAfterMs \(30000\)/,
      );
      expect(() => resolveDuraflowOptions({ reaper: { staleAfterMs: 500 }, worker: { leaseConfirmAfterMs: 600 } })).toThrow(
        InvalidDuraflowOptionsError,
      );
    });
  });

  /** Steps s1..s3; between s1 and s2 the run awaits `between` (where the test takes the task away). */
  function threeSteps(calls: string[], between: (runId: string) => Promise<void> = async () => undefined) {
    return workflow('three-steps', async (ctx: WorkflowContext) => {
      calls.push('run');
      await ctx.step.run('s1', () => void calls.push('s1'));
      await between(ctx.runId);
      await ctx.step.run('s2', () => void calls.push('s2'));
      await ctx.step.run('s3', () => void calls.push('s3'));
      return { done: true };
    });
  }

  it('makes no statement to confirm a fresh lease: a run without heartbeats confirms nothing', async () => {
    const calls: string[] = [];
    const app = await bed.start({ duraflow: { heartbeatIntervalMs: 60_000, workflows: [threeSteps(calls)] } });
    const heartbeats = jest.spyOn(app.get(TaskTransitions), 'renew');

    const task = await app.get(WorkflowService).submit('three-steps', {});
    expect((await app.get(WorkflowService).waitFor(task.id, { timeoutMs: 10_000 })).status).toBe(TaskStatus.COMPLETED);

    expect(calls).toEqual(['run', 's1', 's2', 's3']);
    expect(heartbeats).not.toHaveBeenCalled();
  });

  it('confirms a lease older than leaseConfirmAfterMs with one fenced heartbeat before the run and before each step', async () => {
    const calls: string[] = [];
    const app = await bed.start({
      duraflow: { heartbeatIntervalMs: 60_000, worker: { leaseConfirmAfterMs: 0 }, workflows: [threeSteps(calls)] },
    });
    const heartbeats = jest.spyOn(app.get(TaskTransitions), 'renew');

    const task = await app.get(WorkflowService).submit('three-steps', {});
    expect((await app.get(WorkflowService).waitFor(task.id, { timeoutMs: 10_000 })).status).toBe(TaskStatus.COMPLETED);

    expect(calls).toEqual(['run', 's1', 's2', 's3']);
    // The run function, then s1, s2, s3: one statement each, for this claim alone.
    expect(heartbeats).toHaveBeenCalledTimes(4);
    for (const [ids] of heartbeats.mock.calls) expect(ids).toEqual([task.id]);
  });

  it('stops a run whose old lease was lost before it calls the next step, and writes nothing more', async () => {
    const calls: string[] = [];
    // What a reaper and another worker do while this process stalls: the task gets another claim.
    const takeOver = async (runId: string) => {
      await bed.db.client.query(
        `UPDATE agent_tasks SET claim_token = gen_random_uuid(), worker_id = 'another-worker', heartbeat_at = now() WHERE id = $1`,
        [runId],
      );
    };
    const app = await bed.start({
      duraflow: { heartbeatIntervalMs: 60_000, worker: { leaseConfirmAfterMs: 0 }, workflows: [threeSteps(calls, takeOver)] },
    });

    const task = await app.get(WorkflowService).submit('three-steps', {});
    await eventually('the run stopped', () => app.get(WorkerService).stats().stopped === 1, { timeoutMs: 10_000 });
    await sleep(200);

    expect(calls).toEqual(['run', 's1']);
    const { rows } = await bed.db.client.query(`SELECT step_key FROM step_runs WHERE task_id = $1 ORDER BY step_key`, [task.id]);
    expect(rows).toEqual([{ step_key: 's1' }]);
    expect(await app.get(WorkflowService).get(task.id)).toMatchObject({ status: TaskStatus.RUNNING, workerId: 'another-worker' });
  });
});
