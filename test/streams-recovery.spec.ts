import { StreamChunk, TaskStatus } from '@duraflow/nestjs';
import { useChaosBed } from './fixtures/chaos/chaos-bed';
import { eventually } from './support/waiting';
import { withWorkerOutputOnFailure } from './support/worker-process';

/*
 * Events and streams across a recovery: the worker running the task is SIGKILLed mid-stream;
 * the survivor replays the recorded steps (their chunks were written with their checkpoints,
 * the body's chunks once per position) and runs the rest. A reader that was reading live sees
 * each chunk once, in order, and its iteration ends at the close; a getEvent waiting across the
 * kill gets the value the survivor set.
 */
describe('events and streams across a worker killed with SIGKILL', () => {
  const bed = useChaosBed(['chaos-talk']);

  it(
    'a live reader sees each chunk once, in order, and ends after recovery; getEvent waits across it',
    withWorkerOutputOnFailure(async () => {
      const workers = [bed.startWorker({ label: 'A' }), bed.startWorker({ label: 'B' })];
      await Promise.all(workers.map((worker) => worker.ready));
      const steps = 5;
      const submitted = await bed.workflows.submit('chaos-talk', { steps, stepMs: 600 }, { maxRetries: 3 });
      const seen: StreamChunk[] = [];
      const reading = (async () => {
        for await (const chunk of bed.workflows.readStream(submitted.id, 'tokens')) seen.push(chunk);
      })();
      const done = bed.workflows.getEvent(submitted.id, 'done', { timeoutMs: 40_000 });

      await eventually('two chunks of step s2 are read', () => seen.length >= 5, { timeoutMs: 20_000 });
      const owner = (await bed.task(submitted.id)).workerId;
      const victim = workers.find((worker) => worker.workerId === owner);
      if (!victim) throw new Error(`The task is held by ${owner}, not by a worker of this test`);
      victim.kill('SIGKILL');
      await victim.exited;

      await expect(done).resolves.toEqual({ steps });
      await reading;
      const finished = await bed.workflows.waitFor(submitted.id, { timeoutMs: 25_000 });
      expect(finished).toMatchObject({ status: TaskStatus.COMPLETED, retryCount: 1 });
      const expected = Array.from({ length: steps }, (_, i) => [`body ${i + 1}`, `in s${i + 1} a`, `in s${i + 1} b`]).flat();
      expect(seen.map((chunk) => chunk.value)).toEqual(expected);
      expect(seen.map((chunk) => chunk.seq)).toEqual(expected.map((_, index) => index + 1));
      expect(await bed.workflows.getEvent(submitted.id, 'progress', { timeoutMs: 0 })).toEqual({ done: steps - 1 });
      // The step in flight at the kill (each step sleeps 600 ms after its effect) ran again on the survivor: its
      // chunks were written once, by the run that checkpointed it.
      const effects = (await bed.effects(submitted.id)).map((effect) => effect.step_key);
      expect(effects.length).toBeGreaterThan(steps);
    }),
    90_000,
  );
});
