import { isTerminalStatus, TaskStatus } from '@duraflow/nestjs';
import { useChaosBed } from './fixtures/chaos/chaos-bed';
import { KILL_AFTER_FIRST_COMPENSATION_ENV } from './fixtures/chaos/scenarios';
import { eventually } from './support/waiting';
import { withWorkerOutputOnFailure } from './support/worker-process';

describe('chaos: a worker process killed in the middle of a saga rollback', () => {
  const bed = useChaosBed(['chaos-saga']);

  it(
    'has its rollback resumed by another worker, which undoes each remaining step once with its saved output',
    withWorkerOutputOnFailure(async () => {
      const a = bed.startWorker({ label: 'A', env: { [KILL_AFTER_FIRST_COMPENSATION_ENV]: '1' } });
      await a.ready;
      const submitted = await bed.workflows.submit('chaos-saga', { steps: 5, failAt: 4 }, { maxRetries: 3 });

      // On A: s1..s3 complete, s4 fails, the rollback undoes s3 (LIFO) and A dies as it turns to s2.
      await eventually('worker A dies in the rollback', async () => !a.alive || isTerminalStatus((await bed.task(submitted.id)).status), {
        timeoutMs: 20_000,
      });
      expect(await bed.compensations(submitted.id)).toEqual([
        expect.objectContaining({ step_key: 's3', worker_id: a.workerId, pid: a.pid }),
      ]);
      expect(await a.exited).toEqual({ code: null, signal: 'SIGKILL' });

      const b = bed.startWorker({ label: 'B' });
      const finished = await bed.workflows.waitFor(submitted.id, { timeoutMs: 25_000 });
      expect(finished.status).toBe(TaskStatus.ROLLED_BACK);

      const compensations = await bed.compensations(submitted.id);
      expect(compensations.map((row) => [row.step_key, row.worker_id])).toEqual([
        ['s3', a.workerId],
        ['s2', b.workerId],
        ['s1', b.workerId],
      ]);
      const steps = await bed.steps(submitted.id);
      const completed = steps.filter((step) => step.status === 'completed');
      expect(completed.map((step) => step.stepKey)).toEqual(['s1', 's2', 's3']);
      for (const step of completed) {
        expect(step.compensatedAt).not.toBeNull();
        expect(compensations.find((row) => row.step_key === step.stepKey)?.output).toEqual(step.output);
        expect(step.output).toEqual({ step: step.stepKey, token: expect.any(String) });
      }

      // s1..s3 ran once (on A) and were never repeated; s5 never ran.
      const effects = await bed.effects(submitted.id);
      expect(effects.filter((effect) => effect.step_key !== 's4').map((effect) => [effect.step_key, effect.worker_id])).toEqual([
        ['s1', a.workerId],
        ['s2', a.workerId],
        ['s3', a.workerId],
      ]);
    }),
    45_000,
  );
});
