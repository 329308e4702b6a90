import { TaskStatus } from '@duraflow/nestjs';
import { useChaosBed } from './fixtures/chaos/chaos-bed';
import { eventually } from './support/waiting';
import { withWorkerOutputOnFailure } from './support/worker-process';

/*
 * Run logs across a recovery: the worker running the task is SIGKILLed mid-run; the survivor
 * replays the recorded steps. Every line of the body and of every step is kept exactly once:
 * the lines before a checkpoint were written with it, a replayed body writes nothing again, and
 * the lines of the step in flight at the kill (never checkpointed) are logged again by its re-run.
 */
describe('run logs across a worker killed with SIGKILL', () => {
  const bed = useChaosBed(['chaos-logs']);

  it(
    'keeps each body and step line once, in order',
    withWorkerOutputOnFailure(async () => {
      const workers = [bed.startWorker({ label: 'A' }), bed.startWorker({ label: 'B' })];
      await Promise.all(workers.map((worker) => worker.ready));
      const submitted = await bed.workflows.submit('chaos-logs', { steps: 5, stepMs: 600 }, { maxRetries: 3 });
      const checkpointed = async () => (await bed.steps(submitted.id)).filter((step) => step.status === 'completed').length;
      await eventually('two steps are checkpointed', async () => (await checkpointed()) >= 2, { timeoutMs: 20_000 });
      const owner = (await bed.task(submitted.id)).workerId;
      const victim = workers.find((worker) => worker.workerId === owner);
      if (!victim) throw new Error(`The task is held by ${owner}, not by a worker of this test`);
      victim.kill('SIGKILL');
      await victim.exited;

      const finished = await bed.workflows.waitFor(submitted.id, { timeoutMs: 25_000 });
      expect(finished).toMatchObject({ status: TaskStatus.COMPLETED, retryCount: 1 });

      const { items } = await bed.workflows.getLogs(submitted.id);
      const expected = [1, 2, 3, 4, 5].flatMap((n) => [`body ${n}`, `in s${n}`]).concat('end');
      expect(items.map((line) => line.message)).toEqual(expected);
      expect(items.map((line) => line.seq)).toEqual(expected.map((_, index) => index + 1));
      expect(items.filter((line) => line.message.startsWith('in ')).every((line) => line.stepKey === line.message.slice(3))).toBe(true);
    }),
    60_000,
  );
});
