import { DataSource } from 'typeorm';
import { WorkerStats } from '@duraflow/nestjs';
import { CHAOS_TIMINGS, useChaosBed } from './fixtures/chaos/chaos-bed';
import { eventually } from './support/waiting';
import { withWorkerOutputOnFailure } from './support/worker-process';

const TASKS = 300;

describe('chaos: three worker processes on one queue', () => {
  // Nobody dies here: a generous staleness keeps a busy (not dead) worker from being reaped.
  const bed = useChaosBed(['chaos-steps'], { ...CHAOS_TIMINGS, staleAfterMs: 3_000 });

  it(
    'completes every task, runs no step body twice and never lets two workers hold one task',
    withWorkerOutputOnFailure(async () => {
      const workers = ['A', 'B', 'C'].map((label) => bed.startWorker({ label, duraflow: { worker: { concurrency: 5 } } }));
      await Promise.all(workers.map((worker) => worker.ready));

      // One transaction: every task becomes claimable at once, and every worker is woken by its commit.
      await bed.control.get(DataSource).transaction(async (manager) => {
        for (let i = 0; i < TASKS; i++) await bed.workflows.submit('chaos-steps', { steps: 3, stepMs: i % 3 }, { manager });
      });
      await eventually(
        `all ${TASKS} tasks are completed`,
        async () => (await bed.rows.count('agent_tasks', `status = 'completed'`)) === TASKS,
        {
          timeoutMs: 30_000,
        },
      );

      expect(await bed.rows.countByStatus()).toEqual({ completed: TASKS });
      const { rows: totals } = await bed.db.client.query(
        `SELECT count(*)::int AS effects, count(DISTINCT (task_id, step_key))::int AS distinct_steps FROM chaos_effects`,
      );
      expect(totals).toEqual([{ effects: TASKS * 3, distinct_steps: TASKS * 3 }]);
      // Every effect of a task was made by the worker that completed it.
      const { rows: foreign } = await bed.db.client.query(
        `SELECT e.task_id, e.worker_id, t.worker_id AS completed_by
         FROM chaos_effects e JOIN agent_tasks t ON t.id = e.task_id
         WHERE e.worker_id IS DISTINCT FROM t.worker_id`,
      );
      expect(foreign).toEqual([]);

      const { rows: perWorker } = await bed.db.client.query<{ worker_id: string }>(
        `SELECT DISTINCT worker_id FROM chaos_effects ORDER BY worker_id`,
      );
      expect(perWorker.map((row) => row.worker_id)).toEqual(workers.map((worker) => worker.workerId).sort());
      const stats = await Promise.all(workers.map((worker) => worker.call<WorkerStats>('WorkerService', 'stats')));
      for (const stat of stats) expect(stat.completed).toBeGreaterThan(0);
      expect(stats.reduce((sum, stat) => sum + stat.completed, 0)).toBe(TASKS);
    }),
    45_000,
  );
});
