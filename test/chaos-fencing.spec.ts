import { TaskStatus, WorkerStats } from '@duraflow/nestjs';
import { useChaosBed } from './fixtures/chaos/chaos-bed';
import { eventually, sleep } from './support/waiting';
import { withWorkerOutputOnFailure } from './support/worker-process';

const STEP_KEYS = ['s1', 's2', 's3', 's4', 's5'];

describe('chaos: frozen workers, cancellation and graceful shutdown across processes', () => {
  const bed = useChaosBed(['chaos-steps']);

  const checkpoints = async (taskId: string) =>
    (
      await bed.db.client.query(
        `SELECT step_key, status, output, attempt, completed_at, compensated_at FROM step_runs WHERE task_id = $1 ORDER BY step_key`,
        [taskId],
      )
    ).rows;

  it(
    'fences a worker frozen (SIGSTOP) past the stale threshold: when it wakes (SIGCONT) it changes nothing and stops the task',
    withWorkerOutputOnFailure(async () => {
      const a = bed.startWorker({ label: 'A' });
      await a.ready;
      const submitted = await bed.workflows.submit('chaos-steps', { steps: 5, stepMs: 400 }, { maxRetries: 3 });
      await eventually('A checkpointed two steps', async () => (await checkpoints(submitted.id)).length >= 2, { timeoutMs: 20_000 });
      a.kill('SIGSTOP');
      await sleep(200); // a statement A sent just before it froze may still commit
      const frozenAt = (await checkpoints(submitted.id)).map((row) => row.step_key);
      const inFlight = STEP_KEYS[frozenAt.length]; // the step A was inside when it froze

      // Another worker (and leader) takes the task over once A's heartbeat is stale, and finishes it.
      const b = bed.startWorker({ label: 'B' });
      await b.ready;
      const finished = await bed.workflows.waitFor(submitted.id, { timeoutMs: 25_000 });
      expect(finished).toMatchObject({ status: TaskStatus.COMPLETED, workerId: b.workerId, retryCount: 1 });
      const before = await checkpoints(submitted.id);
      const effectsBefore = await bed.effects(submitted.id);

      a.kill('SIGCONT');
      await eventually('A let go of the task', async () => (await a.call<WorkerStats>('WorkerService', 'stats')).running === 0, {
        timeoutMs: 10_000,
      });
      await sleep(500); // give A every chance to write something
      const stats = await a.call<WorkerStats>('WorkerService', 'stats');
      expect(stats).toMatchObject({ completed: 0, failed: 0, stopped: 1 });
      expect(await checkpoints(submitted.id)).toEqual(before);
      expect(await bed.task(submitted.id)).toMatchObject({
        status: TaskStatus.COMPLETED,
        workerId: b.workerId,
        retryCount: 1,
        output: { steps: 5 },
      });
      // A started no new step after waking: at most the body it was inside when it froze went on.
      const effectsAfter = await bed.effects(submitted.id);
      expect(effectsAfter.slice(0, effectsBefore.length)).toEqual(effectsBefore);
      const woke = effectsAfter.slice(effectsBefore.length);
      expect(woke.length).toBeLessThanOrEqual(1);
      for (const effect of woke) expect(effect).toMatchObject({ worker_id: a.workerId, step_key: inFlight });
      // Every step's checkpoint is B's or was A's before the freeze; each step has one completed row.
      expect(before.map((row) => row.step_key)).toEqual(STEP_KEYS);
      expect(before.every((row) => row.status === 'completed')).toBe(true);
    }),
    60_000,
  );

  it(
    'cancels a task running in another process: its step aborts at once and no later step runs',
    withWorkerOutputOnFailure(async () => {
      const a = bed.startWorker({ label: 'A' });
      await a.ready;
      const submitted = await bed.workflows.submit('chaos-steps', { steps: 3, stepMs: 60_000 });
      await eventually('A is inside s1', async () => (await bed.effects(submitted.id)).length === 1, { timeoutMs: 20_000 });

      const cancelled = await bed.workflows.cancel(submitted.id);
      expect(cancelled.status).toBe(TaskStatus.CANCELLED);
      await eventually('A stopped the run', async () => (await a.call<WorkerStats>('WorkerService', 'stats')).stopped === 1, {
        timeoutMs: 10_000,
      });
      await sleep(300);
      expect((await bed.effects(submitted.id)).map((effect) => effect.step_key)).toEqual(['s1']);
      expect(await checkpoints(submitted.id)).toEqual([]);
      expect((await bed.task(submitted.id)).status).toBe(TaskStatus.CANCELLED);
    }),
    45_000,
  );

  it(
    'on SIGTERM hands an unfinished task back without counting a retry, and another worker continues it at once',
    withWorkerOutputOnFailure(async () => {
      // A stale threshold far longer than the test: only the hand-back can get the task to B.
      const slowReaper = { reaper: { staleAfterMs: 120_000 } };
      const a = bed.startWorker({ label: 'A', duraflow: { ...slowReaper, worker: { shutdownTimeoutMs: 300 } } });
      await a.ready;
      const submitted = await bed.workflows.submit('chaos-steps', { steps: 3, stepMs: 1_500 });
      await eventually('A checkpointed s1', async () => (await checkpoints(submitted.id)).length >= 1, { timeoutMs: 20_000 });

      a.kill('SIGTERM');
      // Nest closes the app on the signal (shutdown hooks), then re-raises it.
      expect(await a.exited).toEqual({ code: null, signal: 'SIGTERM' });
      expect(a.output.join('\n')).toContain('Handed 1 unfinished task(s) back to pending on shutdown');
      const handedBack = await bed.task(submitted.id);
      expect(handedBack).toMatchObject({ status: TaskStatus.PENDING, retryCount: 0, workerId: null });

      const b = bed.startWorker({ label: 'B', duraflow: slowReaper });
      const finished = await bed.workflows.waitFor(submitted.id, { timeoutMs: 25_000 });
      expect(finished).toMatchObject({ status: TaskStatus.COMPLETED, workerId: b.workerId, retryCount: 0 });
      const effects = await bed.effects(submitted.id);
      expect(effects.filter((effect) => effect.step_key === 's1')).toEqual([expect.objectContaining({ worker_id: a.workerId })]);
    }),
    45_000,
  );
});
