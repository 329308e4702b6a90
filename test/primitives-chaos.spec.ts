import { Client } from 'pg';
import { TaskStatus } from '@duraflow/nestjs';
import { useChaosBed } from './fixtures/chaos/chaos-bed';
import { eventually } from './support/waiting';
import { withWorkerOutputOnFailure } from './support/worker-process';

/*
 * The durable primitives with worker processes killed by SIGKILL: during a sleep, during a
 * signal wait, and between starting a child and recording it (the worker is held there by a
 * lock on step_runs, so the kill lands at that point and nowhere else).
 */

describe('chaos: durable primitives and worker processes killed with SIGKILL', () => {
  const bed = useChaosBed(['chaos-primitives']);

  const effectKeys = async (taskId: string) => (await bed.effects(taskId)).map((effect) => effect.step_key);

  it(
    'wakes a task whose worker was SIGKILLed while it slept on another worker, without running its first step again',
    withWorkerOutputOnFailure(async () => {
      const victim = bed.startWorker({ label: 'A' });
      await victim.ready;
      const task = await bed.workflows.submit('chaos-sleeper', { ms: 1_500 });
      await eventually('the task sleeps', async () => (await bed.steps(task.id)).some((step) => step.stepKey === 'nap'));
      expect(await bed.rows.task(task.id)).toMatchObject({ status: 'pending', worker_id: null });

      victim.kill('SIGKILL');
      await victim.exited;
      const survivor = bed.startWorker({ label: 'B' });
      await survivor.ready;
      const done = await bed.workflows.waitFor(task.id, { timeoutMs: 20_000 });

      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(done.retryCount).toBe(0);
      expect(await effectKeys(task.id)).toEqual(['s1', 's2']);
      const effects = await bed.effects(task.id);
      expect(effects.map((effect) => effect.worker_id)).toEqual([victim.workerId, survivor.workerId]);
    }),
    45_000,
  );

  it(
    'keeps a signal sent while no worker is alive for a task whose worker was SIGKILLed while it waited, and delivers it after',
    withWorkerOutputOnFailure(async () => {
      const victim = bed.startWorker({ label: 'A' });
      await victim.ready;
      const task = await bed.workflows.submit('chaos-waiter', {});
      await eventually('the task waits', async () =>
        (await bed.steps(task.id)).some((step) => step.stepKey === 'signal:go#1' && step.status === 'waiting'),
      );

      victim.kill('SIGKILL');
      await victim.exited;
      await bed.workflows.signal(task.id, 'go', { n: 7 });
      const survivor = bed.startWorker({ label: 'B' });
      await survivor.ready;
      const done = await bed.workflows.waitFor(task.id, { timeoutMs: 20_000 });

      expect(done).toMatchObject({ status: 'completed', output: { payload: { n: 7 } }, retryCount: 0 });
      expect(await effectKeys(task.id)).toEqual(['s1', 's2']);
    }),
    45_000,
  );

  it(
    'starts a child exactly once when the worker is SIGKILLed between starting it and recording it',
    withWorkerOutputOnFailure(async () => {
      // A lock that lets the child's insert through and holds the step's: the worker stops
      // between the two writes of startChild's transaction, where the kill lands.
      const locker = new Client({ connectionString: bed.db.url });
      await locker.connect();
      try {
        await locker.query('BEGIN');
        await locker.query('LOCK TABLE step_runs IN SHARE MODE');
        const victim = bed.startWorker({ label: 'A' });
        await victim.ready;
        const parent = await bed.workflows.submit('chaos-parent', {}, { maxRetries: 3 });
        await eventually('the worker is held between the child and its step', async () => {
          const { rows } = await bed.db.client.query(
            `SELECT count(*)::int AS n FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO step_runs%''child''%'`,
          );
          return rows[0].n === 1;
        });

        victim.kill('SIGKILL');
        await victim.exited;
        await locker.query('ROLLBACK');
        const survivor = bed.startWorker({ label: 'B' });
        await survivor.ready;
        const done = await bed.workflows.waitFor(parent.id, { timeoutMs: 30_000 });

        expect(done.status).toBe(TaskStatus.COMPLETED);
        expect(done.retryCount).toBe(1);
        const children = await bed.workflows.getChildren(parent.id);
        expect(children).toHaveLength(1);
        expect(done.output).toEqual({ id: children[0].id });
        await bed.workflows.waitFor(children[0].id, { timeoutMs: 20_000 });
        expect(await effectKeys(children[0].id)).toEqual(['k']);
        expect(await bed.rows.count('agent_tasks', `workflow_name = 'chaos-kid'`)).toBe(1);
      } finally {
        await locker.end();
      }
    }),
    60_000,
  );
});
