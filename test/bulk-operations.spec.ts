import { TestingModule } from '@nestjs/testing';
import {
  InvalidBulkFilterError,
  InvalidBulkOptionsError,
  TaskStatus,
  UnknownWorkflowError,
  WorkflowService,
  workflow,
  WorkflowContext,
} from '@duraflow/nestjs';
import { useChaosBed } from './fixtures/chaos/chaos-bed';
import { scenario } from './fixtures/saga/scenario';
import { TRIP } from './fixtures/saga/workflows';
import { startSagaApp, useSagaBed } from './fixtures/saga/saga-bed';
import { SUBMIT_ONLY, useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';
import { withWorkerOutputOnFailure } from './support/worker-process';

/*
 * cancelMany, retryMany and resumeMany against PostgreSQL: what a filter selects, limit and dry
 * run, a second call that changes nothing, batches of one short transaction each, each task
 * changed at most once while real worker processes claim, and a cancel with compensation.
 */

const noop = workflow('bulk-noop', async (ctx: WorkflowContext) => ctx.step.run('only', () => 1));

interface Row {
  workflow?: string;
  version?: number | null;
  status?: string;
  created?: string;
  held?: boolean;
  rollback?: string;
}

describe('bulk operations: selection, limit, dry run', () => {
  const bed = useTestBed();
  let app: TestingModule;
  let workflows: WorkflowService;

  beforeAll(async () => {
    app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [noop] } });
    workflows = app.get(WorkflowService);
  });
  beforeEach(() => bed.db.client.query(`TRUNCATE agent_tasks, step_runs, dead_letter_queue`));

  /** Tasks written past the library, one per row (scheduled far ahead, so nothing would claim them). */
  async function insert(rows: Row[]): Promise<string[]> {
    const ids: string[] = [];
    for (const row of rows) {
      const { rows: inserted } = await bed.db.client.query<{ id: string }>(
        `INSERT INTO agent_tasks (workflow_name, workflow_version, status, created_at, held_at, rollback_reason, error, scheduled_at)
         VALUES ($1, $2, $3::varchar, COALESCE($4::timestamptz, now()), CASE WHEN $5::boolean THEN now() END, $6,
                 CASE WHEN $3::varchar = 'failed' OR $5::boolean THEN '{"message":"x"}'::jsonb END, now() + interval '1 day')
         RETURNING id`,
        [
          row.workflow ?? 'export',
          row.version ?? null,
          row.status ?? 'pending',
          row.created ?? null,
          row.held ?? false,
          row.rollback ?? null,
        ],
      );
      ids.push(inserted[0].id);
    }
    return ids;
  }

  async function statuses(ids: string[]): Promise<string[]> {
    const { rows } = await bed.db.client.query<{ id: string; status: string }>(`SELECT id, status FROM agent_tasks WHERE id = ANY($1)`, [
      ids,
    ]);
    return ids.map((id) => rows.find((row) => row.id === id)!.status);
  }

  it('cancels only the pending and running tasks the filter selects: workflow, version, status, creation time', async () => {
    const ids = await insert([
      { workflow: 'export', status: 'pending', created: '2024-01-01T00:00:00Z' },
      { workflow: 'export', status: 'running', created: '2024-01-02T00:00:00Z' },
      { workflow: 'export', status: 'pending', created: '2023-06-01T00:00:00Z' },
      { workflow: 'export', status: 'pending', version: 2, created: '2024-01-03T00:00:00Z' },
      { workflow: 'import', status: 'pending', created: '2024-01-03T00:00:00Z' },
      { workflow: 'export', status: 'completed', created: '2024-01-03T00:00:00Z' },
      { workflow: 'export', status: 'pending', rollback: 'cancelled', created: '2024-01-03T00:00:00Z' },
    ]);

    const result = await workflows.cancelMany({
      workflow: 'export',
      version: 1,
      createdAfter: '2024-01-01T00:00:00Z',
      createdBefore: new Date('2025-01-01'),
    });

    expect(result).toEqual({ matched: 2, changed: 2 });
    expect(await statuses(ids)).toEqual(['cancelled', 'cancelled', 'pending', 'pending', 'pending', 'completed', 'pending']);
    expect(await workflows.cancelMany({ workflow: 'export', status: 'running' })).toEqual({ matched: 0, changed: 0 });
    expect(await workflows.cancelMany({ workflow: 'export', status: ['pending'], version: 2 })).toEqual({ matched: 1, changed: 1 });
  });

  it('matches a workflow this application does not register (tasks of a workflow since removed)', async () => {
    const ids = await insert([{ workflow: 'removed-long-ago' }, { workflow: 'removed-long-ago' }]);

    expect(await workflows.cancelMany({ workflow: 'removed-long-ago' })).toEqual({ matched: 2, changed: 2 });
    expect(await statuses(ids)).toEqual(['cancelled', 'cancelled']);
  });

  it('changes each task once across batches; a second identical call changes nothing', async () => {
    await bed.db.client.query(
      `INSERT INTO agent_tasks (workflow_name, status, scheduled_at, created_at)
       SELECT 'export', 'pending', now() + interval '1 day', now() - (n % 7) * interval '1 second' FROM generate_series(1, 1234) n`,
    );

    expect(await workflows.cancelMany({ workflow: 'export' })).toEqual({ matched: 1234, changed: 1234 });
    expect(await workflows.cancelMany({ workflow: 'export' })).toEqual({ matched: 0, changed: 0 });
    expect(await bed.rows.countByStatus()).toEqual({ cancelled: 1234 });
  });

  it('changes at most `limit` tasks, and a dry run counts (at most `limit`) and writes nothing', async () => {
    await insert(Array.from({ length: 7 }, () => ({ workflow: 'export' })));

    expect(await workflows.cancelMany({ workflow: 'export' }, { dryRun: true })).toEqual({ matched: 7, changed: 0 });
    expect(await workflows.cancelMany({ workflow: 'export' }, { dryRun: true, limit: 5 })).toEqual({ matched: 5, changed: 0 });
    expect(await bed.rows.countByStatus()).toEqual({ pending: 7 });
    expect(await workflows.cancelMany({ workflow: 'export' }, { limit: 3 })).toEqual({ matched: 3, changed: 3 });
    expect(await bed.rows.countByStatus()).toEqual({ cancelled: 3, pending: 4 });
    expect(await workflows.cancelMany({ workflow: 'export' }, { limit: 10 })).toEqual({ matched: 4, changed: 4 });
  });

  it('resumes only held tasks, and retries only failed tasks and cancelled ones not compensated', async () => {
    const ids = await insert([
      { status: 'pending', held: true },
      { status: 'pending' },
      { status: 'failed' },
      { status: 'cancelled' },
      { status: 'completed' },
    ]);
    await bed.db.client.query(`UPDATE agent_tasks SET scheduled_at = NULL`);

    expect(await workflows.resumeMany({ workflow: 'export' })).toEqual({ matched: 1, changed: 1 });
    expect(await workflows.resumeMany({ workflow: 'export' })).toEqual({ matched: 0, changed: 0 });
    expect((await bed.rows.task(ids[0])).held_at).toBeNull();
    expect(await workflows.retryMany({ workflow: 'export' }, { dryRun: true })).toEqual({ matched: 2, changed: 0 });
    expect(await workflows.retryMany({ workflow: 'export', status: 'failed' })).toEqual({ matched: 1, changed: 1 });
    expect(await workflows.retryMany({ workflow: 'export' })).toEqual({ matched: 1, changed: 1 });
    expect(await workflows.retryMany({ workflow: 'export' })).toEqual({ matched: 0, changed: 0 });
    expect(await statuses(ids)).toEqual(['pending', 'pending', 'pending', 'pending', 'completed']);
  });

  it('refuses, writing nothing: an empty filter (unless all), bad tags, a status the operation never changes, bad options', async () => {
    await insert([{ workflow: 'export' }, { workflow: 'other' }]);

    await expect(workflows.cancelMany({})).rejects.toMatchObject({ code: 'INVALID_BULK_FILTER', field: 'filter' });
    await expect(workflows.retryMany({ all: false })).rejects.toBeInstanceOf(InvalidBulkFilterError);
    await expect(workflows.cancelMany({ workflow: 'export', tags: { tenant: 5 as unknown as string } })).rejects.toMatchObject({
      code: 'INVALID_BULK_FILTER',
      field: 'tags',
      message: expect.stringContaining('must be a string'),
    });
    await expect(workflows.cancelMany({ status: 'completed' })).rejects.toMatchObject({ field: 'status' });
    await expect(workflows.resumeMany({ status: ['failed'] })).rejects.toMatchObject({ field: 'status' });
    await expect(workflows.cancelMany({ status: 'nope' as TaskStatus })).rejects.toMatchObject({ field: 'status' });
    await expect(workflows.cancelMany({ workflow: 'export' }, { limit: 0 })).rejects.toBeInstanceOf(InvalidBulkOptionsError);
    await expect(workflows.cancelMany({ workflow: 'export' }, { dryRun: 'yes' as unknown as boolean })).rejects.toMatchObject({
      code: 'INVALID_BULK_OPTIONS',
      option: 'dryRun',
    });
    // Compensations run in this process: a workflow it does not register is refused before any write.
    await expect(workflows.cancelMany({ all: true }, { compensate: true })).rejects.toBeInstanceOf(UnknownWorkflowError);
    expect(await bed.rows.countByStatus()).toEqual({ pending: 2 });

    expect(await workflows.cancelMany({ all: true })).toEqual({ matched: 2, changed: 2 });
  });

  it('moves each batch in a short transaction of its own, never more than one batch locked, while a claim walks past', async () => {
    await bed.db.client.query(`CREATE TABLE bulk_moves (txid bigint NOT NULL, task_id uuid NOT NULL)`);
    await bed.db.client.query(
      `CREATE FUNCTION record_bulk_move() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN INSERT INTO bulk_moves VALUES (txid_current(), NEW.id); RETURN NEW; END $$`,
    );
    await bed.db.client.query(
      `CREATE TRIGGER record_bulk_move AFTER UPDATE ON agent_tasks FOR EACH ROW EXECUTE FUNCTION record_bulk_move()`,
    );
    await bed.db.client.query(
      `INSERT INTO agent_tasks (workflow_name, status, scheduled_at) SELECT 'export', 'pending', now() + interval '1 day' FROM generate_series(1, 2600)`,
    );
    // A concurrent single-row claim in the bulk's own order: it skips the batch the bulk holds and
    // takes the next row, so it is never blocked by more than that one batch.
    let running = true;
    let claimed = 0;
    const claim = (async () => {
      while (running) {
        await bed.db.client.query('BEGIN');
        const { rows } = await bed.db.client.query(
          `SELECT id FROM agent_tasks WHERE status = 'pending' ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED`,
        );
        await bed.db.client.query('ROLLBACK');
        claimed += rows.length;
      }
    })();

    const result = await workflows.cancelMany({ workflow: 'export' });
    running = false;
    await claim;

    // A task the claim held at its batch and at each revisit is matched, not changed, and left as it was.
    const counts = await bed.rows.countByStatus();
    expect(result).toEqual({ matched: 2600, changed: counts.cancelled });
    expect(counts.cancelled + (counts.pending ?? 0)).toBe(2600);
    expect(claimed).toBeGreaterThan(0);
    const { rows } = await bed.db.client.query<{ moved: number }>(
      `SELECT count(*)::int AS moved FROM bulk_moves GROUP BY txid ORDER BY 1 DESC`,
    );
    expect(rows.length).toBeGreaterThanOrEqual(6);
    expect(rows[0].moved).toBeLessThanOrEqual(500);
    expect(rows.reduce((sum, row) => sum + row.moved, 0)).toBe(counts.cancelled);
  });
});

describe('bulk operations: cancelMany while worker processes claim', () => {
  const chaos = useChaosBed(['chaos-steps']);

  it(
    'leaves every task either completed or cancelled, never both, and changes each at most once',
    withWorkerOutputOnFailure(async () => {
      const workers = ['A', 'B'].map((label) => chaos.startWorker({ label, duraflow: { worker: { concurrency: 8 } } }));
      await Promise.all(workers.map((worker) => worker.ready));
      const tasks = await chaos.workflows.submitMany(
        'chaos-steps',
        Array.from({ length: 800 }, () => ({ steps: 3, stepMs: 2 })),
      );
      await eventually('the workers are claiming', async () => (await chaos.rows.count('agent_tasks', `status <> 'pending'`)) > 20);

      const result = await chaos.workflows.cancelMany({ workflow: 'chaos-steps' });
      await eventually(
        'every task finished',
        async () => (await chaos.rows.count('agent_tasks', `status IN ('pending', 'running')`)) === 0,
        {
          timeoutMs: 30_000,
        },
      );

      const counts = await chaos.rows.countByStatus();
      expect(Object.keys(counts).sort()).toEqual(expect.arrayContaining(['cancelled']));
      expect((counts.completed ?? 0) + counts.cancelled).toBe(tasks.length);
      expect(result.changed).toBe(counts.cancelled);
      expect(result.matched).toBeGreaterThanOrEqual(result.changed);
      // A completed task ran every step once; no step of any task ran twice.
      const { rows } = await chaos.db.client.query<{ status: string; effects: number; distinct_steps: number; outputs: number }>(
        `SELECT t.status, count(e.*)::int AS effects, count(DISTINCT e.step_key)::int AS distinct_steps, (t.output IS NOT NULL)::int AS outputs
         FROM agent_tasks t LEFT JOIN chaos_effects e ON e.task_id = t.id GROUP BY t.id`,
      );
      for (const row of rows) {
        expect(row.effects).toBe(row.distinct_steps);
        if (row.status === 'completed') expect(row).toMatchObject({ effects: 3, outputs: 1 });
        else expect(row).toMatchObject({ status: 'cancelled', outputs: 0 });
      }
      expect(await chaos.workflows.cancelMany({ workflow: 'chaos-steps' })).toEqual({ matched: 0, changed: 0 });
    }),
    90_000,
  );
});

describe('bulk operations: cancelMany with compensation', () => {
  const bed = useSagaBed();

  it('undoes the completed steps of each task, newest first, as cancel(id, { compensate: true }) does', async () => {
    const gate = scenario.blockStep('rent-car');
    const app = await startSagaApp(bed);
    const workflows = app.get(WorkflowService);
    const tasks = [await workflows.submit('trip', TRIP), await workflows.submit('trip', TRIP)];
    await gate.reached.promise;
    await eventually(
      'both trips wait in rent-car',
      async () => (await bed.rows.count('step_runs', `step_key = 'book-hotel' AND status = 'completed'`)) === 2,
    );

    const result = await workflows.cancelMany({ workflow: 'trip' }, { compensate: true });

    expect(result).toEqual({ matched: 2, changed: 2 });
    for (const task of tasks) {
      expect(scenario.undone(task.id)).toEqual(['book-hotel', 'book-flight']);
      expect(await bed.rows.task(task.id)).toMatchObject({ status: 'cancelled', rollback_reason: 'cancelled' });
    }
    expect(await workflows.cancelMany({ workflow: 'trip' }, { compensate: true })).toEqual({ matched: 0, changed: 0 });
  }, 30_000);
});
