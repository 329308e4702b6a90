import { randomUUID } from 'node:crypto';
import { ScheduleModule } from '@nestjs/schedule';
import { TestingModule } from '@nestjs/testing';
import { DuraflowModuleOptions, InvalidDuraflowOptionsError, ReaperService } from '@duraflow/nestjs';
import { resolveDuraflowOptions } from '../libs/duraflow/src/config/resolved-options';
import { useTestBed } from './support/test-bed';
import { eventually, sleep } from './support/waiting';

const HOUR = 3_600_000;

describe('retention', () => {
  const bed = useTestBed({ databasePerTest: true });

  /** A task as a run leaves it: `status`, finished `finishedAgoMs` ago, with `steps` step runs. */
  async function insertTask(status: string, finishedAgoMs: number, steps = 2): Promise<string> {
    const { rows } = await bed.db.client.query<{ id: string }>(
      `INSERT INTO agent_tasks (workflow_name, status, created_at, started_at, completed_at, updated_at)
       VALUES ('kept-or-not', $1::varchar, now() - ($2::bigint + 1000) * interval '1 millisecond', now() - $2::bigint * interval '1 millisecond',
               CASE WHEN $1::varchar IN ('pending', 'running') THEN NULL ELSE now() - $2::bigint * interval '1 millisecond' END,
               now() - $2::bigint * interval '1 millisecond')
       RETURNING id`,
      [status, finishedAgoMs],
    );
    const id = rows[0].id;
    for (let i = 0; i < steps; i++) {
      await bed.db.client.query(`INSERT INTO step_runs (task_id, step_key, status) VALUES ($1, $2, 'completed')`, [id, `step-${i}`]);
    }
    return id;
  }

  async function remaining(ids: string[]): Promise<string[]> {
    const { rows } = await bed.db.client.query<{ id: string }>(`SELECT id FROM agent_tasks WHERE id = ANY($1::uuid[])`, [ids]);
    const left = new Set(rows.map((row) => row.id));
    return ids.filter((id) => left.has(id));
  }

  function startApp(duraflow: DuraflowModuleOptions): Promise<TestingModule> {
    return bed.start({
      imports: [ScheduleModule.forRoot()],
      duraflow: {
        worker: { enabled: false },
        reaper: { enabled: false, leaderKey: `duraflow:test:${randomUUID()}` },
        ...duraflow,
      },
    });
  }

  it('removes finished tasks past their status retention with their step runs, and nothing else', async () => {
    const app = await startApp({ retention: { completed: HOUR, rolledBack: HOUR, cancelled: 2 * HOUR } });
    const completedOld = await insertTask('completed', 2 * HOUR);
    const completedNew = await insertTask('completed', HOUR / 2);
    const rolledBackOld = await insertTask('rolled_back', 2 * HOUR);
    const cancelledOld = await insertTask('cancelled', 3 * HOUR);
    const cancelledYounger = await insertTask('cancelled', 90 * 60_000);
    const failedOld = await insertTask('failed', 100 * HOUR);
    const partialOld = await insertTask('partial_rollback', 100 * HOUR);
    const runningOld = await insertTask('running', 100 * HOUR);
    const pendingOld = await insertTask('pending', 100 * HOUR);

    const removed = await app.get(ReaperService).removeExpiredTasks();

    expect(removed).toEqual({ completed: 1, failed: 0, rolledBack: 1, cancelled: 1 });
    const all = [completedOld, completedNew, rolledBackOld, cancelledOld, cancelledYounger, failedOld, partialOld, runningOld, pendingOld];
    expect(await remaining(all)).toEqual([completedNew, cancelledYounger, failedOld, partialOld, runningOld, pendingOld]);
    expect(await bed.rows.count('step_runs', 'task_id = ANY($1::uuid[])', [[completedOld, rolledBackOld, cancelledOld]])).toBe(0);
    expect(await bed.rows.count('step_runs')).toBe(12);
    expect(app.get(ReaperService).retentionStats()).toMatchObject({
      enabled: true,
      removed: { completed: 1, failed: 0, rolledBack: 1, cancelled: 1 },
      batches: 1,
    });
  });

  it('keeps a task whose dead letter is still open, and removes it once the entry is resolved', async () => {
    const app = await startApp({ retention: { rolledBack: 0, failed: 0 } });
    const withEntry = await insertTask('rolled_back', HOUR);
    const without = await insertTask('failed', HOUR);
    const [{ id: stepId }] = await bed.rows.steps(withEntry);
    await bed.db.client.query(`INSERT INTO dead_letter_queue (task_id, step_id, error) VALUES ($1, $2, '{}')`, [withEntry, stepId]);

    expect(await app.get(ReaperService).removeExpiredTasks()).toMatchObject({ rolledBack: 0, failed: 1 });
    expect(await remaining([withEntry, without])).toEqual([withEntry]);
    expect(await bed.rows.count('step_runs', 'task_id = $1', [withEntry])).toBe(2);

    await bed.db.client.query(`DELETE FROM dead_letter_queue WHERE task_id = $1`, [withEntry]);
    expect(await app.get(ReaperService).removeExpiredTasks()).toMatchObject({ rolledBack: 1 });
    expect(await remaining([withEntry])).toEqual([]);
  });

  it('removes a backlog in statements of at most batchSize tasks per status', async () => {
    const app = await startApp({ retention: { completed: HOUR, failed: HOUR, batchSize: 3 } });
    const completed = await Promise.all(Array.from({ length: 10 }, () => insertTask('completed', 2 * HOUR, 1)));
    const failed = await Promise.all(Array.from({ length: 4 }, () => insertTask('failed', 2 * HOUR, 1)));

    expect(await app.get(ReaperService).removeExpiredTasks()).toEqual({ completed: 10, failed: 4, rolledBack: 0, cancelled: 0 });
    expect(await remaining([...completed, ...failed])).toEqual([]);
    // completed 3 + 3 + 3 + 1 (the last batch not full: done), failed 3 + 1 alongside: 4 statements.
    expect(app.get(ReaperService).retentionStats().batches).toBe(4);
  });

  it('is run by the reaper leader by itself, and by nobody while no status has a retention', async () => {
    const old = await insertTask('completed', 2 * HOUR);
    await startApp({ reaper: { enabled: true, intervalMs: 100, staleAfterMs: 1_000, leaderTtlMs: 1_000, leaderKey: `k:${randomUUID()}` } });
    await sleep(1_000);
    expect(await remaining([old])).toEqual([old]);

    const app = await startApp({
      reaper: { enabled: true, intervalMs: 100, staleAfterMs: 1_000, leaderTtlMs: 1_000, leaderKey: `k:${randomUUID()}` },
      retention: { completed: HOUR, intervalMs: 100 },
    });
    await eventually('the leader removed the expired task', async () => (await remaining([old])).length === 0);
    const stats = app.get(ReaperService).retentionStats();
    expect(stats.removed.completed).toBe(1);
    expect(stats.lastSweepAt).toBeInstanceOf(Date);
  });

  it('refuses a retention that is not a duration, naming the option', () => {
    expect(() => resolveDuraflowOptions({ retention: { completed: -1 } })).toThrow(InvalidDuraflowOptionsError);
    expect(() => resolveDuraflowOptions({ retention: { failed: 1.5 } })).toThrow(/retention\.failed/);
    expect(() => resolveDuraflowOptions({ retention: { batchSize: 0 } })).toThrow(/retention\.batchSize/);
    expect(() => resolveDuraflowOptions({ retention: 'forever' as never })).toThrow(/retention/);
    expect(resolveDuraflowOptions({}).retention).toMatchObject({ completed: undefined, failed: undefined, batchSize: 500 });
  });
});
