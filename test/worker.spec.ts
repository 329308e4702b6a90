import { TestingModule } from '@nestjs/testing';
import { Pool } from 'pg';
import { InvalidDuraflowOptionsError, TaskStatus, WorkerService, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { resolveDuraflowOptions } from '../libs/duraflow/src/config/resolved-options';
import { TaskTransitions } from '../libs/duraflow/src/persistence/lifecycle/task-transitions';
import { StepBarrier } from './fixtures/steps/barrier';
import { useTestBed } from './support/test-bed';
import { eventually, sleep } from './support/waiting';

/** A workflow whose only step records the task's label, in execution order. */
function recordingWorkflow(name: string, executed: string[]) {
  return workflow(name, async (ctx: WorkflowContext<{ label: string }>) => {
    await ctx.step.run('record', () => {
      executed.push(ctx.input.label);
    });
    return { label: ctx.input.label };
  });
}

/** A workflow whose only step waits at `barrier` until the test releases it. */
function blockingWorkflow(name: string, barrier: StepBarrier) {
  return workflow(name, async (ctx: WorkflowContext<{ label?: string }>) => {
    await ctx.step.run('block', () => barrier.pass());
    return { released: ctx.input.label ?? true };
  });
}

describe('WorkerService', () => {
  const bed = useTestBed({ databasePerTest: true });

  describe('claim order', () => {
    it('runs pending tasks by priority, highest first, then oldest first', async () => {
      const executed: string[] = [];
      const app = await bed.start({
        duraflow: { worker: { enabled: false, concurrency: 1 }, workflows: [recordingWorkflow('ordered', executed)] },
      });
      const workflows = app.get(WorkflowService);
      const submitted: Array<[string, number]> = [
        ['a', 0],
        ['b', 5],
        ['c', -1],
        ['d', 5],
        ['e', 10],
        ['f', 0],
        ['g', 5],
        ['h', -1],
      ];
      const ids: string[] = [];
      for (const [label, priority] of submitted) ids.push((await workflows.submit('ordered', { label }, { priority })).id);
      expect(executed).toEqual([]);

      await app.get(WorkerService).start();
      for (const id of ids) expect((await workflows.waitFor(id, { timeoutMs: 15_000 })).status).toBe(TaskStatus.COMPLETED);

      expect(executed).toEqual(['e', 'b', 'd', 'g', 'a', 'f', 'c', 'h']);
    });
  });

  describe('scheduledAt', () => {
    it('does not claim a task before its scheduledAt, and claims it once the time has come', async () => {
      const executed: string[] = [];
      const app = await bed.start({ duraflow: { workflows: [recordingWorkflow('timed', executed)] } });
      const workflows = app.get(WorkflowService);

      const scheduledAt = new Date(Date.now() + 2_000);
      const later = await workflows.submit('timed', { label: 'later' }, { scheduledAt, priority: 10 });
      const now = await workflows.submit('timed', { label: 'now' });
      expect(later.scheduledAt?.getTime()).toBe(scheduledAt.getTime());

      // The worker claimed (and finished) a lower-priority task after the scheduled one was written.
      expect((await workflows.waitFor(now.id, { timeoutMs: 10_000 })).status).toBe(TaskStatus.COMPLETED);
      const { rows: waiting } = await bed.db.client.query(
        `SELECT status, started_at, worker_id, now() < scheduled_at AS before_its_time FROM agent_tasks WHERE id = $1`,
        [later.id],
      );
      expect(waiting[0]).toEqual({ status: 'pending', started_at: null, worker_id: null, before_its_time: true });
      expect(executed).toEqual(['now']);

      expect((await workflows.waitFor(later.id, { timeoutMs: 15_000 })).status).toBe(TaskStatus.COMPLETED);
      const { rows } = await bed.db.client.query(`SELECT started_at >= scheduled_at AS on_time FROM agent_tasks WHERE id = $1`, [later.id]);
      expect(rows[0].on_time).toBe(true);
      expect(executed).toEqual(['now', 'later']);
    });

    it('claims a task scheduled in the past as soon as it is submitted', async () => {
      const executed: string[] = [];
      // With polling effectively off, only the submit's NOTIFY can make the worker claim it.
      const app = await bed.start({
        duraflow: { worker: { pollIntervalMs: 60_000 }, workflows: [recordingWorkflow('overdue', executed)] },
      });
      const workflows = app.get(WorkflowService);

      const task = await workflows.submit('overdue', { label: 'overdue' }, { scheduledAt: new Date(Date.now() - 60_000) });

      expect((await workflows.waitFor(task.id, { timeoutMs: 10_000 })).status).toBe(TaskStatus.COMPLETED);
      expect(executed).toEqual(['overdue']);
    });
  });

  describe('registered workflows', () => {
    it('claims only tasks of workflows this process registered; another process that registers one runs it', async () => {
      const executedHere: string[] = [];
      const executedThere: string[] = [];
      const here = await bed.start({
        duraflow: { workerId: 'worker-here', workflows: [recordingWorkflow('known-here', executedHere)] },
      });
      const foreignId = await bed.rows.insertTask('known-elsewhere', { label: 'foreign' }, 100);
      const local = await here.get(WorkflowService).submit('known-here', { label: 'local' });

      // The worker claimed past the higher-priority foreign task.
      expect((await here.get(WorkflowService).waitFor(local.id, { timeoutMs: 10_000 })).status).toBe(TaskStatus.COMPLETED);
      expect(here.get(WorkerService).stats().workflows).toEqual(['known-here']);
      const stranded = await bed.rows.task(foreignId);
      expect(stranded.status).toBe('pending');
      expect(stranded.worker_id).toBeNull();
      expect(stranded.started_at).toBeNull();

      const there = await bed.start({
        duraflow: { workerId: 'worker-there', workflows: [recordingWorkflow('known-elsewhere', executedThere)] },
      });
      const done = await there.get(WorkflowService).waitFor(foreignId, { timeoutMs: 10_000 });

      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(done.workerId).toBe('worker-there');
      expect(executedHere).toEqual(['local']);
      expect(executedThere).toEqual(['foreign']);
    });
  });

  describe('concurrency', () => {
    it('runs at most `concurrency` tasks at once and completes all of them once released', async () => {
      const barrier = new StepBarrier();
      const app = await bed.start({
        duraflow: { worker: { concurrency: 3 }, workflows: [blockingWorkflow('blocked', barrier)] },
      });
      const workflows = app.get(WorkflowService);
      const worker = app.get(WorkerService);
      try {
        const tasks = await Promise.all(Array.from({ length: 10 }, (_, i) => workflows.submit('blocked', { label: `t${i}` })));

        await eventually('three steps are blocked', () => barrier.waiting === 3);
        await sleep(300); // several poll intervals: a worker ignoring its limit would claim more now
        expect(barrier.entered).toBe(3);
        expect(await bed.rows.countByStatus()).toEqual({ running: 3, pending: 7 });
        expect(worker.stats()).toMatchObject({ state: 'running', concurrency: 3, running: 3, claimed: 3, completed: 0 });

        barrier.releaseOne();
        await eventually('one task finished and the next is blocked', () => worker.stats().completed === 1 && barrier.waiting === 3);
        expect(barrier.entered).toBe(4);
        expect(barrier.maxInFlight).toBe(3);
        expect(worker.stats()).toMatchObject({ running: 3, claimed: 4, completed: 1 });

        barrier.open();
        for (const task of tasks) expect((await workflows.waitFor(task.id, { timeoutMs: 15_000 })).status).toBe(TaskStatus.COMPLETED);
        await eventually('the worker counted every completion', () => worker.stats().completed === 10);

        expect(barrier.entered).toBe(10);
        expect(barrier.maxInFlight).toBe(3);
        expect(worker.stats()).toMatchObject({ running: 0, claimed: 10, completed: 10, failed: 0 });
        expect(await bed.rows.countByStatus()).toEqual({ completed: 10 });
      } finally {
        barrier.open();
      }
    });
  });

  describe('LISTEN/NOTIFY', () => {
    it('wakes on the NOTIFY of a submit, not on its poll', async () => {
      const executed: string[] = [];
      const app = await bed.start({
        duraflow: { worker: { pollIntervalMs: 60_000 }, workflows: [recordingWorkflow('notified', executed)] },
      });
      const workflows = app.get(WorkflowService);
      expect(app.get(WorkerService).stats().listening).toBe(true);

      // A row written behind the library's back sends no NOTIFY: nothing wakes the worker for it.
      await sleep(500); // lets the claim the worker makes on start finish first
      const silentId = await bed.rows.insertTask('notified', { label: 'silent' });
      await sleep(300);
      expect((await bed.rows.task(silentId)).status).toBe('pending');

      const task = await workflows.submit('notified', { label: 'submitted' });

      expect((await workflows.waitFor(task.id, { timeoutMs: 10_000 })).status).toBe(TaskStatus.COMPLETED);
      // The submit's NOTIFY woke the worker, and that claim also found the silent task.
      expect((await workflows.waitFor(silentId, { timeoutMs: 10_000 })).status).toBe(TaskStatus.COMPLETED);
      expect(executed.sort()).toEqual(['silent', 'submitted']);
    });
  });

  describe('submit-only node', () => {
    it('with worker.enabled false claims nothing and stays idle; a worker node runs what it accepted', async () => {
      const executed: string[] = [];
      const definition = recordingWorkflow('accepted', executed);
      const submitOnly = await bed.start({ duraflow: { worker: { enabled: false }, workflows: [definition] } });
      const task = await submitOnly.get(WorkflowService).submit('accepted', { label: 'x' });

      await sleep(300); // several poll intervals of a worker that should not exist
      const row = await bed.rows.task(task.id);
      expect(row.status).toBe('pending');
      expect(row.started_at).toBeNull();
      expect(row.worker_id).toBeNull();
      expect(submitOnly.get(WorkerService).stats()).toMatchObject({ state: 'idle', running: 0, claimed: 0 });
      expect(executed).toEqual([]);

      const workerNode = await bed.start({ duraflow: { workflows: [definition] } });
      expect((await workerNode.get(WorkflowService).waitFor(task.id, { timeoutMs: 10_000 })).status).toBe(TaskStatus.COMPLETED);
      expect(executed).toEqual(['x']);
      expect(submitOnly.get(WorkerService).stats()).toMatchObject({ state: 'idle', claimed: 0 });
    });
  });

  describe('prefetch', () => {
    it('claims up to `prefetch` tasks ahead of its slots, starts them as slots free, and never runs more than `concurrency`', async () => {
      const barrier = new StepBarrier();
      const app = await bed.start({
        duraflow: { worker: { concurrency: 2, prefetch: 3 }, workflows: [blockingWorkflow('ahead', barrier)] },
      });
      const worker = app.get(WorkerService);
      const workflows = app.get(WorkflowService);
      const ids: string[] = [];
      for (let i = 0; i < 8; i++) ids.push((await workflows.submit('ahead', { label: String(i) })).id);

      await eventually('two run and three wait', () => barrier.waiting === 2 && worker.stats().backpressure.waiting === 3);
      expect(await bed.rows.countByStatus()).toEqual({ running: 5, pending: 3 });
      expect(worker.stats()).toMatchObject({ claimed: 5, running: 5 });

      barrier.open();
      for (const id of ids) expect((await workflows.waitFor(id)).status).toBe(TaskStatus.COMPLETED);
      expect(barrier.maxInFlight).toBe(2);
      expect(worker.stats().backpressure.waiting).toBe(0);
    });

    it('hands the tasks it claimed ahead back at once on shutdown, without counting a retry', async () => {
      const barrier = new StepBarrier();
      const app = await bed.start({
        duraflow: {
          worker: { concurrency: 1, prefetch: 2, shutdownTimeoutMs: 300 },
          workflows: [blockingWorkflow('ahead', barrier)],
        },
      });
      const workflows = app.get(WorkflowService);
      for (let i = 0; i < 3; i++) await workflows.submit('ahead', {});
      await eventually('one runs, two wait', () => barrier.waiting === 1 && app.get(WorkerService).stats().backpressure.waiting === 2);

      await bed.close(app);

      expect(barrier.entered).toBe(1); // the waiting ones never started
      const { rows } = await bed.db.client.query(`SELECT DISTINCT status, retry_count, worker_id FROM agent_tasks`);
      expect(rows).toEqual([{ status: 'pending', retry_count: 0, worker_id: null }]);
      barrier.open();
    });
  });

  describe("prefetch 'auto' (the default)", () => {
    const quick = workflow('quick', async (ctx: WorkflowContext<{ n: number }>) => ctx.input.n);

    it('claims up to `concurrency` tasks ahead while the runs are short', async () => {
      const app = await bed.start({ duraflow: { worker: { enabled: false, concurrency: 2 }, workflows: [quick] } });
      const worker = app.get(WorkerService);
      const tasks = app.get(TaskTransitions, { strict: false });
      const limits: number[] = [];
      const claim = tasks.claim.bind(tasks);
      jest.spyOn(tasks, 'claim').mockImplementation((workerId, names, limit) => (limits.push(limit), claim(workerId, names, limit)));
      expect(worker.stats().backpressure.prefetch).toBe(0); // no run seen yet

      const workflows = app.get(WorkflowService);
      const submitted = await workflows.submitMany(
        'quick',
        Array.from({ length: 30 }, (_, n) => ({ n })),
      );
      await worker.start();
      for (const task of submitted) expect((await workflows.waitFor(task.id)).status).toBe(TaskStatus.COMPLETED);

      expect(limits[0]).toBe(2);
      expect(Math.max(...limits)).toBe(4); // two slots and two ahead
      expect(worker.stats().backpressure.prefetch).toBe(2);
    });

    it('hands tasks claimed ahead back to pending when the runs turn long, for a worker with a free slot', async () => {
      const barrier = new StepBarrier();
      const definitions = [quick, blockingWorkflow('long', barrier)];
      const app = await bed.start({ duraflow: { worker: { concurrency: 2, pollIntervalMs: 50 }, workflows: definitions } });
      const worker = app.get(WorkerService);
      const workflows = app.get(WorkflowService);
      for (const task of await workflows.submitMany('quick', [{ n: 1 }, { n: 2 }, { n: 3 }])) {
        expect((await workflows.waitFor(task.id)).status).toBe(TaskStatus.COMPLETED);
      }
      expect(worker.stats().backpressure.prefetch).toBe(2);

      // Short runs so far: one claim takes all four, two start and block, two wait...
      const long = await workflows.submitMany('long', [{ label: 'a' }, { label: 'b' }, { label: 'c' }, { label: 'd' }]);
      // ...until, 500 ms later, they go back without counting a retry.
      // The hand-back's statement commits before the worker counts it: both are waited for.
      await eventually(
        'two run and two are back',
        async () => barrier.waiting === 2 && (await bed.rows.countByStatus()).pending === 2 && worker.stats().stopped === 2,
      );
      expect(worker.stats()).toMatchObject({ claimed: 7, stopped: 2, running: 2 });
      expect(worker.stats().backpressure).toMatchObject({ waiting: 0, prefetch: 0 });
      const { rows } = await bed.db.client.query(`SELECT retry_count, worker_id, claim_token FROM agent_tasks WHERE status = 'pending'`);
      expect(rows).toEqual([
        { retry_count: 0, worker_id: null, claim_token: null },
        { retry_count: 0, worker_id: null, claim_token: null },
      ]);
      await sleep(200); // several poll ticks: the busy worker does not claim them again
      expect(await bed.rows.countByStatus()).toEqual({ completed: 3, running: 2, pending: 2 });

      await bed.start({ duraflow: { workerId: 'free-worker', worker: { concurrency: 2 }, workflows: definitions } });
      await eventually('the other worker runs the two handed back', () => barrier.waiting === 4);
      barrier.open();
      for (const task of long) expect((await workflows.waitFor(task.id)).status).toBe(TaskStatus.COMPLETED);
      expect(barrier.entered).toBe(4);
      const { rows: byWorker } = await bed.db.client.query(
        `SELECT count(*)::int AS n FROM agent_tasks WHERE workflow_name = 'long' AND worker_id = 'free-worker'`,
      );
      expect(byWorker[0].n).toBe(2);
    });

    it('hands them back after about 500 ms even when the poll interval is long', async () => {
      const barrier = new StepBarrier();
      const app = await bed.start({
        duraflow: {
          // Only NOTIFY wakes this worker; the lag window's tick does the check.
          worker: { concurrency: 1, pollIntervalMs: 60_000, backpressure: { lagWindowMs: 100 } },
          workflows: [quick, blockingWorkflow('long', barrier)],
        },
      });
      const worker = app.get(WorkerService);
      const workflows = app.get(WorkflowService);
      const [warmUp] = await workflows.submitMany('quick', [{ n: 1 }]);
      expect((await workflows.waitFor(warmUp.id)).status).toBe(TaskStatus.COMPLETED);
      await eventually('the worker claims ahead', () => worker.stats().backpressure.prefetch === 1);

      const long = await workflows.submitMany('long', [{ label: 'a' }, { label: 'b' }]);
      await eventually('one runs', () => barrier.waiting === 1);
      const started = Date.now();
      await eventually('the other is back', async () => (await bed.rows.countByStatus()).pending === 1, { timeoutMs: 5_000 });
      expect(Date.now() - started).toBeLessThan(3_000); // not the 60 s poll interval
      expect(worker.stats()).toMatchObject({ stopped: 1, running: 1 });

      barrier.open();
      await bed.start({ duraflow: { workerId: 'free-worker', workflows: [quick, blockingWorkflow('long', barrier)] } });
      for (const task of long) expect((await workflows.waitFor(task.id)).status).toBe(TaskStatus.COMPLETED);
    });

    it("rejects a prefetch that is neither a whole number nor 'auto'", () => {
      for (const prefetch of ['fast', -1, 1.5]) {
        expect(() => resolveDuraflowOptions({ worker: { prefetch: prefetch as never } })).toThrow(InvalidDuraflowOptionsError);
      }
      expect(() => resolveDuraflowOptions({ worker: { prefetch: 'fast' as never } })).toThrow(/worker\.prefetch.*or 'auto'/);
      expect(resolveDuraflowOptions({}).worker.prefetch).toBe('auto');
      expect(resolveDuraflowOptions({ worker: { prefetch: 0 } }).worker.prefetch).toBe(0);
    });
  });

  describe('graceful shutdown', () => {
    it('hands a task still running after shutdownTimeoutMs back to pending without counting a retry', async () => {
      const stuck = new StepBarrier();
      const app = await bed.start({
        duraflow: { workerId: 'worker-closing', worker: { shutdownTimeoutMs: 200 }, workflows: [blockingWorkflow('slow', stuck)] },
      });
      try {
        const task = await app.get(WorkflowService).submit('slow', {});
        await eventually('the step is blocked', () => stuck.waiting === 1);
        expect((await bed.rows.task(task.id)).worker_id).toBe('worker-closing');

        await bed.close(app);

        const row = await bed.rows.task(task.id);
        expect(row.status).toBe('pending');
        expect(row.retry_count).toBe(0);
        expect(row.worker_id).toBeNull();
        expect(row.claim_token).toBeNull();
        expect(row.heartbeat_at).toBeNull();
        const { rows: completedSteps } = await bed.db.client.query(
          `SELECT step_key FROM step_runs WHERE task_id = $1 AND status = 'completed'`,
          [task.id],
        );
        expect(completedSteps).toEqual([]);

        // Handed back, it is claimable again as the same attempt.
        const attempts: number[] = [];
        const free = new StepBarrier();
        free.open();
        const next = await bed.start({
          duraflow: {
            workflows: [
              workflow('slow', async (ctx) => {
                attempts.push(ctx.attempt);
                await ctx.step.run('block', () => free.pass());
                return 'done';
              }),
            ],
          },
        });
        const done = await next.get(WorkflowService).waitFor(task.id, { timeoutMs: 10_000 });
        expect(done.status).toBe(TaskStatus.COMPLETED);
        expect(done.retryCount).toBe(0);
        expect(attempts).toEqual([1]);
      } finally {
        stuck.open();
      }
    });

    it('lets a task that finishes within shutdownTimeoutMs complete during close', async () => {
      const barrier = new StepBarrier();
      const app = await bed.start({
        duraflow: { worker: { shutdownTimeoutMs: 10_000 }, workflows: [blockingWorkflow('finishing', barrier)] },
      });
      const worker = app.get(WorkerService);
      try {
        const task = await app.get(WorkflowService).submit('finishing', { label: 'last' });
        await eventually('the step is blocked', () => barrier.waiting === 1);

        const closing = bed.close(app);
        await eventually('the worker is stopping', () => worker.stats().state === 'stopping');
        barrier.open();
        await closing;

        const row = await bed.rows.task(task.id);
        expect(row.status).toBe('completed');
        expect(row.output).toEqual({ released: 'last' });
        expect(worker.stats()).toMatchObject({ state: 'stopped', completed: 1, stopped: 0 });
      } finally {
        barrier.open();
      }
    });
  });

  describe('exactly-once claiming', () => {
    it('two workers on one database drain 200 tasks, each run exactly once', async () => {
      await bed.db.client.query(`CREATE TABLE executions (task_id uuid NOT NULL, worker text NOT NULL)`);
      const sideEffects = new Pool({ connectionString: bed.db.url, max: 4 });
      const noop = (worker: string) =>
        workflow('noop', async (ctx) => {
          await sideEffects.query(`INSERT INTO executions (task_id, worker) VALUES ($1, $2)`, [ctx.runId, worker]);
          return null;
        });
      try {
        const apps: TestingModule[] = [];
        for (const worker of ['worker-a', 'worker-b']) {
          apps.push(
            await bed.start({
              duraflow: { workerId: worker, worker: { enabled: false, concurrency: 4 }, workflows: [noop(worker)] },
            }),
          );
        }
        const submitted = await Promise.all(Array.from({ length: 200 }, (_, i) => apps[i % 2].get(WorkflowService).submit('noop', { i })));
        expect(new Set(submitted.map((task) => task.id)).size).toBe(200);

        const workers = apps.map((app) => app.get(WorkerService));
        await Promise.all(workers.map((worker) => worker.start()));
        await eventually('all 200 tasks completed', async () => (await bed.rows.countByStatus()).completed === 200, { timeoutMs: 25_000 });

        const { rows: duplicates } = await bed.db.client.query(
          `SELECT task_id, count(*)::int AS runs FROM executions GROUP BY task_id HAVING count(*) > 1`,
        );
        expect(duplicates).toEqual([]);
        const { rows: totals } = await bed.db.client.query(
          `SELECT count(*)::int AS runs, count(DISTINCT task_id)::int AS tasks,
                  count(*) FILTER (WHERE task_id NOT IN (SELECT id FROM agent_tasks))::int AS unknown
           FROM executions`,
        );
        expect(totals[0]).toEqual({ runs: 200, tasks: 200, unknown: 0 });

        // Each task's worker_id names the worker that actually ran it, and both workers took a share.
        const { rows: mismatched } = await bed.db.client.query(
          `SELECT e.task_id FROM executions e JOIN agent_tasks t ON t.id = e.task_id WHERE t.worker_id IS DISTINCT FROM e.worker`,
        );
        expect(mismatched).toEqual([]);
        await eventually('both workers counted their runs', () => workers[0].stats().completed + workers[1].stats().completed === 200);
        const stats = workers.map((worker) => worker.stats());
        expect(stats.map((s) => s.completed > 0)).toEqual([true, true]);
        // A task claimed ahead (prefetch 'auto') and handed back unstarted counts as claimed and
        // stopped by one worker, then claimed and completed by whichever ran it.
        expect(stats[0].claimed + stats[1].claimed - stats[0].stopped - stats[1].stopped).toBe(200);
      } finally {
        await sideEffects.end();
      }
    });
  });
});
