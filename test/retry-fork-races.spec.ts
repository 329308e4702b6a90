import { TaskStatus } from '@duraflow/nestjs';
import { ChaosBed, ChaosEffectRow, useChaosBed } from './fixtures/chaos/chaos-bed';
import { FAIL_AT_STEP_ENV, KILL_AT_STEP_ENV } from './fixtures/chaos/scenarios';
import { eventually, sleep } from './support/waiting';
import { withWorkerOutputOnFailure, WorkerProcess } from './support/worker-process';

/*
 * workflows.retry and workflows.fork (issue 26, DESIGN.md semantics 16) racing real worker
 * processes: the reaper of another process, a cancel and retries from other processes, a worker
 * mid-step, a worker SIGKILLed. The 'chaos-retry' steps record every real run in chaos_effects
 * (outside the engine's tables), tagged with the worker that ran it, so "never re-run" is counted.
 */

const bed = useChaosBed(['chaos-retry']); // 'chaos-retry' and 'chaos-retry-keyed'
const WAIT = { timeoutMs: 60_000 };

function ranSteps(effects: ChaosEffectRow[], key: string, workers?: WorkerProcess[]): ChaosEffectRow[] {
  const ids = workers?.map((worker) => worker.workerId);
  return effects.filter((effect) => effect.step_key === key && (!ids || ids.includes(effect.worker_id)));
}

async function completedSteps(chaos: ChaosBed, taskId: string): Promise<string[]> {
  return (await chaos.steps(taskId)).filter((step) => step.status === 'completed').map((step) => step.stepKey);
}

describe('retry and fork racing worker processes', () => {
  it(
    'retry racing the reaper: one history entry per failure, then a healthy worker completes it without re-running a completed step',
    withWorkerOutputOnFailure(async () => {
      const FAILURES = 3;
      // maxRetries 0: each death in s2 makes the reaper (in a worker process) fail the task with MAX_RETRIES_EXCEEDED.
      const task = await bed.workflows.submit('chaos-retry', { steps: 3, stepMs: 50 }, { maxRetries: 0 });
      const killers: WorkerProcess[] = [];
      let retried = 0;
      let looping = true;
      const refusals = new Set<string>();
      // Four loops in the test process send retries all along; each refusal must be the typed one.
      const loops = Array.from({ length: 4 }, async () => {
        while (looping) {
          try {
            await bed.workflows.retry(task.id);
            retried++;
          } catch (error) {
            refusals.add((error as Error).name);
          }
          await sleep(5);
        }
      });

      try {
        const killed = async () => ranSteps(await bed.effects(task.id), 's2').length;
        const deadline = Date.now() + 90_000;
        // Two killer processes alive at a time: one dies in s2, the other (or a new one) reaps it.
        while ((await killed()) < FAILURES) {
          if (Date.now() > deadline) throw new Error(`Fewer than ${FAILURES} deaths in s2 after 90 s`);
          while (killers.filter((worker) => worker.alive).length < 2) {
            killers.push(bed.startWorker({ label: `K${killers.length + 1}`, env: { [KILL_AT_STEP_ENV]: 's2' } }));
          }
          await sleep(50);
        }
        for (const worker of killers) worker.kill('SIGKILL');
        await Promise.all(killers.map((worker) => worker.exited));
        const live = bed.startWorker({ label: 'live' });

        // Not waitFor: each failure is terminal for a moment, until a retry moves it.
        await eventually('the task completed', async () => (await bed.task(task.id)).status === TaskStatus.COMPLETED, WAIT);
        looping = false;
        await Promise.all(loops);
        const done = await bed.task(task.id);
        expect(done.workerId).toBe(live.workerId);
        expect(done.output).toEqual({ steps: 3 });

        const effects = await bed.effects(task.id);
        const deaths = ranSteps(effects, 's2', killers).length;
        expect(deaths).toBeGreaterThanOrEqual(FAILURES);
        // Each death was one failure, each failure was retried once: one history entry and one successful call each.
        expect(done.history).toHaveLength(deaths);
        expect(retried).toBe(deaths);
        for (const entry of done.history ?? []) {
          expect(entry).toMatchObject({
            kind: 'retried',
            fromStatus: 'failed',
            error: expect.objectContaining({ code: 'MAX_RETRIES_EXCEEDED' }),
          });
        }
        expect(new Set(done.history?.map((entry) => entry.at)).size).toBe(deaths);
        expect([...refusals].filter((name) => name !== 'TaskNotRetryableError')).toEqual([]);
        // s1 completed before the first death and never ran again; s2 ran once per death and once on the live worker.
        expect(ranSteps(effects, 's1')).toHaveLength(1);
        expect(ranSteps(effects, 's2', [live])).toHaveLength(1);
        expect(ranSteps(effects, 's3')).toEqual([expect.objectContaining({ worker_id: live.workerId })]);
      } finally {
        looping = false;
        await Promise.all(loops);
      }
    }),
    150_000,
  );

  it(
    'retry racing a cancel and a second retry from other processes: each call changes a task at most once, final states match the history',
    withWorkerOutputOnFailure(async () => {
      const COUNT = 60;
      const ids: string[] = [];
      for (let n = 0; n < COUNT; n++) ids.push((await bed.workflows.submit('chaos-retry', { steps: 1, stepMs: 0 })).id);
      // Failed as a step failing for good leaves a task (no step row: nothing compensated, nothing kept).
      await bed.db.client.query(
        `UPDATE agent_tasks SET status = 'failed', completed_at = now(),
                error = '{"name":"Error","message":"provider down","code":"STEP_FAILED"}' WHERE id = ANY($1::uuid[])`,
        [ids],
      );
      // Processes that run no workflow: they only call the service, as an operator's app or the engine does.
      const noWorker = { worker: { enabled: false }, reaper: { enabled: false } };
      const callers = ['R1', 'C', 'R2'].map((label) => bed.startWorker({ label, duraflow: noWorker }));
      await Promise.all(callers.map((caller) => caller.ready));

      const [retries1, cancels, retries2] = await Promise.all(
        callers.map((caller, index) =>
          Promise.all(
            ids.map((id) =>
              caller.call('WorkflowService', index === 1 ? 'cancel' : 'retry', id).then(
                () => true,
                (error: Error) => {
                  const expected = index === 1 ? 'TaskAlreadyFinishedError' : 'TaskNotRetryableError';
                  if (error.name !== expected) throw error;
                  return false;
                },
              ),
            ),
          ),
        ),
      );

      for (const [n, id] of ids.entries()) {
        const task = await bed.task(id);
        const retried = Number(retries1[n]) + Number(retries2[n]);
        const history = task.history ?? [];
        expect({ id, retried, history: history.length }).toEqual({ id, retried, history: retried });
        expect(history.every((entry) => entry.kind === 'retried')).toBe(true);
        if (!cancels[n]) {
          // No cancel landed: the first retry moved it, the second found it pending.
          expect({ id, retried, status: task.status }).toEqual({ id, retried: 1, status: TaskStatus.PENDING });
          expect(history[0]).toMatchObject({ fromStatus: 'failed', error: expect.objectContaining({ message: 'provider down' }) });
        } else if (retried === 1) {
          // retry, then cancel: the second retry came before the cancel (refused) — cancelled stays.
          expect({ id, status: task.status }).toEqual({ id, status: TaskStatus.CANCELLED });
          expect(history.map((entry) => (entry.kind === 'retried' ? entry.fromStatus : entry.kind))).toEqual(['failed']);
        } else {
          // retry, cancel, retry: each move once, in that order.
          expect({ id, retried, status: task.status }).toEqual({ id, retried: 2, status: TaskStatus.PENDING });
          expect(history.map((entry) => (entry.kind === 'retried' ? entry.fromStatus : entry.kind))).toEqual(['failed', 'cancelled']);
        }
      }
      // A cancel can only have met a task a retry had moved: at least one retry per cancelled task.
      expect(ids.filter((_, n) => cancels[n] && !retries1[n] && !retries2[n])).toEqual([]);
    }),
    120_000,
  );

  it(
    'retry right after a cancel of a task running mid-step on a worker process: the retried run re-runs no completed step',
    withWorkerOutputOnFailure(async () => {
      const workers = [bed.startWorker({ label: 'A' }), bed.startWorker({ label: 'B' })];
      await Promise.all(workers.map((worker) => worker.ready));
      const task = await bed.workflows.submit('chaos-retry', { steps: 3, stepMs: 2_000 });
      await eventually('s2 is running', async () => ranSteps(await bed.effects(task.id), 's2').length === 1, { timeoutMs: 30_000 });
      expect((await bed.workflows.cancel(task.id)).status).toBe(TaskStatus.CANCELLED);
      const retried = await bed.workflows.retry(task.id);
      expect(retried.history).toEqual([expect.objectContaining({ kind: 'retried', fromStatus: 'cancelled' })]);

      const done = await bed.workflows.waitFor(task.id, WAIT);
      expect(done).toMatchObject({ status: TaskStatus.COMPLETED, output: { steps: 3 } });
      expect(done.history).toHaveLength(1);
      const effects = await bed.effects(task.id);
      expect(ranSteps(effects, 's1')).toHaveLength(1);
      // s2 was in flight at the cancel: it ran again once; s3 ran once.
      expect(ranSteps(effects, 's2')).toHaveLength(2);
      expect(ranSteps(effects, 's3')).toHaveLength(1);
      expect((await bed.steps(task.id)).map((step) => `${step.stepKey}:${step.status}`)).toEqual([
        's1:completed',
        's2:completed',
        's3:completed',
      ]);
    }),
    120_000,
  );

  it(
    'fork of a running task mid-step: the original runs on and completes, the fork never runs its copied steps and completes on another process',
    withWorkerOutputOnFailure(async () => {
      // Concurrency 1: the busy original's worker cannot take the fork.
      const first = bed.startWorker({ label: 'A', duraflow: { worker: { concurrency: 1 } } });
      await first.ready;
      const original = await bed.workflows.submit('chaos-retry', { steps: 4, stepMs: 2_500 });
      await eventually('A holds the original', async () => (await bed.task(original.id)).workerId === first.workerId, {
        timeoutMs: 30_000,
      });
      const second = bed.startWorker({ label: 'B' });
      // Mid-step: s3 has recorded its effect and sleeps; s1 and s2 are checkpointed.
      await eventually('s3 of the original is running', async () => ranSteps(await bed.effects(original.id), 's3').length === 1, {
        timeoutMs: 30_000,
      });
      expect(await completedSteps(bed, original.id)).toEqual(['s1', 's2']);
      await second.ready;

      // From s2 (a step the original recorded; the running s3 has no row yet): s1 copied, s2.. run anew.
      const fork = await bed.workflows.fork(original.id, { fromStep: 's2', input: { steps: 4, stepMs: 10 } });
      expect(fork.forkedFrom).toEqual({ taskId: original.id, fromStep: 's2' });
      expect(fork.copiedSteps).toBe(1);
      expect((await bed.task(original.id)).status).toBe(TaskStatus.RUNNING);

      const forkDone = await bed.workflows.waitFor(fork.id, WAIT);
      const originalDone = await bed.workflows.waitFor(original.id, WAIT);
      expect(forkDone).toMatchObject({ status: TaskStatus.COMPLETED, workerId: second.workerId, output: { steps: 4 } });
      expect(originalDone).toMatchObject({ status: TaskStatus.COMPLETED, workerId: first.workerId, output: { steps: 4 } });

      const keys = (effects: ChaosEffectRow[]) => effects.map((effect) => `${effect.step_key}@${effect.worker_id}`);
      expect(keys(await bed.effects(original.id))).toEqual(['s1', 's2', 's3', 's4'].map((key) => `${key}@${first.workerId}`));
      expect(keys(await bed.effects(fork.id))).toEqual(['s2', 's3', 's4'].map((key) => `${key}@${second.workerId}`));
      expect((await bed.steps(fork.id)).map((step) => step.stepKey)).toEqual(['s1', 's2', 's3', 's4']);
    }),
    120_000,
  );

  it(
    'fork of a workflow under a per-key concurrency limit: the keyed claim reads its copied steps, which never run',
    withWorkerOutputOnFailure(async () => {
      const worker = bed.startWorker({ label: 'W' });
      await worker.ready;
      const original = await bed.workflows.submit('chaos-retry-keyed', { steps: 3, stepMs: 0 });
      expect((await bed.workflows.waitFor(original.id, WAIT)).status).toBe(TaskStatus.COMPLETED);

      const fork = await bed.workflows.fork(original.id, { fromStep: 's3' });
      expect(fork.copiedSteps).toBe(2);
      expect(await bed.workflows.waitFor(fork.id, WAIT)).toMatchObject({ status: TaskStatus.COMPLETED, output: { steps: 3 } });
      expect((await bed.effects(fork.id)).map((effect) => effect.step_key)).toEqual(['s3']);
      expect((await bed.effects(original.id)).map((effect) => effect.step_key)).toEqual(['s1', 's2', 's3']);
    }),
    120_000,
  );

  it(
    'a worker SIGKILLed while running a retried task: recovery re-runs no step completed before or after the retry',
    withWorkerOutputOnFailure(async () => {
      const failing = bed.startWorker({ label: 'F', env: { [FAIL_AT_STEP_ENV]: 's3' } });
      await failing.ready;
      const task = await bed.workflows.submit('chaos-retry', { steps: 6, stepMs: 700 }, { maxRetries: 1 });
      const failed = await bed.workflows.waitFor(task.id, WAIT);
      expect(failed.status).toBe(TaskStatus.FAILED);
      expect(failed.error).toMatchObject({ stepKey: 's3' });
      await failing.stop();
      const beforeRetry = await bed.effects(task.id);
      expect(ranSteps(beforeRetry, 's1')).toHaveLength(1);
      expect(ranSteps(beforeRetry, 's2')).toHaveLength(1);

      const workers = [bed.startWorker({ label: 'W1' }), bed.startWorker({ label: 'W2' })];
      await Promise.all(workers.map((worker) => worker.ready));
      await bed.workflows.retry(task.id);
      await eventually('s4 completed after the retry', async () => (await completedSteps(bed, task.id)).includes('s4'), {
        timeoutMs: 30_000,
      });
      const owner = (await bed.task(task.id)).workerId;
      const victim = workers.find((worker) => worker.workerId === owner);
      const survivor = workers.find((worker) => worker.workerId !== owner);
      if (!victim || !survivor) throw new Error(`The task is held by ${owner}, not by a worker of this test`);
      const checkpointedBeforeKill = await completedSteps(bed, task.id);
      victim.kill('SIGKILL');
      expect(await victim.exited).toEqual({ code: null, signal: 'SIGKILL' });
      expect(checkpointedBeforeKill.length).toBeLessThan(6);

      const done = await bed.workflows.waitFor(task.id, WAIT);
      expect(done).toMatchObject({ status: TaskStatus.COMPLETED, workerId: survivor.workerId, retryCount: 1, output: { steps: 6 } });
      expect(done.history).toEqual([expect.objectContaining({ kind: 'retried', fromStatus: 'failed' })]);

      const effects = await bed.effects(task.id);
      const afterRetry = effects.slice(beforeRetry.length);
      // Completed before the retry: ran once, on F, never again.
      for (const key of ['s1', 's2']) expect(ranSteps(effects, key)).toEqual([expect.objectContaining({ worker_id: failing.workerId })]);
      // Completed after the retry and before the kill: ran once since the retry, on the victim.
      for (const key of checkpointedBeforeKill.filter((key) => !['s1', 's2'].includes(key))) {
        expect({ key, ran: ranSteps(afterRetry, key) }).toEqual({ key, ran: [expect.objectContaining({ worker_id: victim.workerId })] });
      }
      // Only the step in flight at the kill ran on both; every step ran after the retry from s3 on.
      const victimRan = afterRetry.filter((e) => e.worker_id === victim.workerId).map((e) => e.step_key);
      const survivorRan = afterRetry.filter((e) => e.worker_id === survivor.workerId).map((e) => e.step_key);
      expect(victimRan.length + survivorRan.length).toBe(afterRetry.length);
      expect(victimRan.filter((key) => survivorRan.includes(key)).length).toBeLessThanOrEqual(1);
      expect(new Set(afterRetry.map((e) => e.step_key))).toEqual(new Set(['s3', 's4', 's5', 's6']));
      expect(survivorRan.filter((key) => checkpointedBeforeKill.includes(key))).toEqual([]);
    }),
    120_000,
  );
});
