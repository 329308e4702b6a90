import { isTerminalStatus, TaskStatus } from '@duraflow/nestjs';
import { useChaosBed } from './fixtures/chaos/chaos-bed';
import { eventually } from './support/waiting';
import { withWorkerOutputOnFailure } from './support/worker-process';

const STEP_KEYS = ['s1', 's2', 's3', 's4', 's5'];

describe('chaos: worker processes killed with SIGKILL', () => {
  const bed = useChaosBed(['chaos-steps', 'chaos-suicide']);

  it(
    'lets another worker process finish a task whose worker died mid-workflow, without running its checkpointed steps again',
    withWorkerOutputOnFailure(async () => {
      const workers = [bed.startWorker({ label: 'A' }), bed.startWorker({ label: 'B' })];
      await Promise.all(workers.map((worker) => worker.ready));
      const submitted = await bed.workflows.submit('chaos-steps', { steps: 5, stepMs: 700 }, { maxRetries: 3 });

      const checkpointed = async () =>
        (await bed.steps(submitted.id)).filter((step) => step.status === 'completed').map((step) => step.stepKey);
      await eventually('two steps are checkpointed', async () => (await checkpointed()).length >= 2, { timeoutMs: 20_000 });
      const owner = (await bed.task(submitted.id)).workerId;
      const victim = workers.find((worker) => worker.workerId === owner);
      const survivor = workers.find((worker) => worker.workerId !== owner);
      if (!victim || !survivor) throw new Error(`The task is held by ${owner}, not by a worker of this test`);
      const checkpointedBeforeKill = await checkpointed();
      victim.kill('SIGKILL');
      expect(await victim.exited).toEqual({ code: null, signal: 'SIGKILL' });
      expect(checkpointedBeforeKill.length).toBeLessThan(STEP_KEYS.length);

      const finished = await bed.workflows.waitFor(submitted.id, { timeoutMs: 25_000 });
      expect(finished.status).toBe(TaskStatus.COMPLETED);
      expect(finished.retryCount).toBe(1);
      expect(finished.workerId).toBe(survivor.workerId);
      expect(finished.output).toEqual({ steps: 5 });

      const effects = await bed.effects(submitted.id);
      const ranOn = (worker: { workerId: string }) =>
        effects.filter((effect) => effect.worker_id === worker.workerId).map((effect) => effect.step_key);
      // The victim ran a prefix s1..sm, the survivor a suffix sj..s5, each step once per worker.
      const victimRan = ranOn(victim);
      const survivorRan = ranOn(survivor);
      expect(victimRan).toEqual(STEP_KEYS.slice(0, victimRan.length));
      expect(survivorRan).toEqual(STEP_KEYS.slice(STEP_KEYS.length - survivorRan.length));
      expect(victimRan.length + survivorRan.length).toBe(effects.length);
      // Every step checkpointed before the kill ran exactly once, on the victim.
      for (const key of checkpointedBeforeKill) {
        expect(effects.filter((effect) => effect.step_key === key)).toEqual([expect.objectContaining({ worker_id: victim.workerId })]);
      }
      // Together they ran every step; only the one in flight at the kill may have run on both.
      expect(new Set([...victimRan, ...survivorRan])).toEqual(new Set(STEP_KEYS));
      expect(victimRan.filter((key) => survivorRan.includes(key)).length).toBeLessThanOrEqual(1);
    }),
    45_000,
  );

  it(
    'fails a task whose worker dies on every attempt with MAX_RETRIES_EXCEEDED once its max_retries recoveries are used',
    withWorkerOutputOnFailure(async () => {
      const submitted = await bed.workflows.submit('chaos-suicide', {}, { maxRetries: 2 });

      const workers = await bed.superviseWorkers(
        (n) => bed.startWorker({ label: `S${n}` }),
        async () => isTerminalStatus((await bed.task(submitted.id)).status),
        { alive: 2, timeoutMs: 30_000 },
      );

      const finished = await bed.task(submitted.id);
      expect(finished.status).toBe(TaskStatus.FAILED);
      expect(finished.error).toEqual(expect.objectContaining({ code: 'MAX_RETRIES_EXCEEDED' }));
      expect(finished.retryCount).toBe(2);
      const effects = await bed.effects(submitted.id);
      expect(effects).toHaveLength(finished.maxRetries + 1);
      // Each execution was a different process, and each of them died by its own SIGKILL.
      const killed = workers.filter((worker) => !worker.alive);
      expect(new Set(effects.map((effect) => effect.pid))).toEqual(new Set(killed.map((worker) => worker.pid)));
      for (const worker of killed) expect(await worker.exited).toEqual({ code: null, signal: 'SIGKILL' });
    }),
    45_000,
  );
});
