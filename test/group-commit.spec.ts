import { randomUUID } from 'node:crypto';
import { TaskStatus, WorkerService, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { CheckpointBatcher } from '../libs/duraflow/src/execution/checkpoint-batcher';
import { CompletedStep, StepStore } from '../libs/duraflow/src/persistence/step.store';
import { DuraflowDatabase } from '../libs/duraflow/src/persistence/duraflow-database';
import { TaskTransitions } from '../libs/duraflow/src/persistence/lifecycle/task-transitions';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * Group commit of step checkpoints across runs (one statement for the steps of many runs),
 * and of claims and completions per event-loop turn. What must hold: every row stays fenced
 * on its own run's claim, a batch never writes a step twice nor loses one, and a row that
 * already exists does not fail the other runs' steps of the same batch.
 */
describe('Group commit', () => {
  const bed = useTestBed({ databasePerTest: true });

  /** A running task claimed with `token`, written past the library. */
  async function runningTask(token: string): Promise<string> {
    const { rows } = await bed.db.client.query<{ id: string }>(
      `INSERT INTO agent_tasks (workflow_name, status, claim_token, worker_id, started_at, heartbeat_at)
       VALUES ('batch', 'running', $1, 'w', now(), now()) RETURNING id`,
      [token],
    );
    return rows[0].id;
  }

  function step(taskId: string, claimToken: string, stepKey: string, output: unknown, completionSeq = 1): CompletedStep {
    return {
      taskId,
      claimToken,
      stepKey,
      outputJson: output === undefined ? null : JSON.stringify(output),
      compensationFn: null,
      attempt: 1,
      startedAt: new Date(),
      completionSeq,
    };
  }

  async function completedStepsOfEveryTask(): Promise<
    Array<{ task_id: string; step_key: string; output: unknown; completion_seq: number }>
  > {
    const { rows } = await bed.db.client.query(
      `SELECT task_id, step_key, output, completion_seq FROM step_runs WHERE status = 'completed' ORDER BY task_id, step_key`,
    );
    return rows;
  }

  describe('StepStore.insertCompletedSteps', () => {
    it('writes the steps of many runs in one statement, each fenced on its own claim', async () => {
      const app = await bed.start({ duraflow: { worker: { enabled: false } } });
      const steps = app.get(StepStore, { strict: false });
      const [tokenA, tokenB, tokenC] = [randomUUID(), randomUUID(), randomUUID()];
      const [a, b, c] = [await runningTask(tokenA), await runningTask(tokenB), await runningTask(tokenC)];
      // c was taken over: its row carries a newer claim than the run that writes.
      await bed.db.client.query(`UPDATE agent_tasks SET claim_token = gen_random_uuid() WHERE id = $1`, [c]);

      const written = await steps.insertCompletedSteps([
        step(a, tokenA, 's1', { n: 1 }),
        step(c, tokenC, 's1', { n: 'lost' }),
        step(b, tokenB, 's1', [1, 'two', null]),
        step(a, tokenA, 's2', undefined, 2),
      ]);

      expect(written).toEqual([true, false, true, true]);
      const rows = await completedStepsOfEveryTask();
      expect(rows).toHaveLength(3);
      expect(rows).toEqual(
        expect.arrayContaining([
          { task_id: a, step_key: 's1', output: { n: 1 }, completion_seq: 1 },
          { task_id: a, step_key: 's2', output: null, completion_seq: 2 },
          { task_id: b, step_key: 's1', output: [1, 'two', null], completion_seq: 1 },
        ]),
      );
      const { rows: outputNull } = await bed.db.client.query(`SELECT output IS NULL AS sql_null FROM step_runs WHERE step_key = 's2'`);
      expect(outputNull).toEqual([{ sql_null: true }]);
    });

    it('writes nothing for a finished task, or for an old claim of a task this process claimed again', async () => {
      const app = await bed.start({ duraflow: { worker: { enabled: false } } });
      const steps = app.get(StepStore, { strict: false });
      const oldToken = randomUUID();
      const newToken = randomUUID();
      const task = await runningTask(newToken);
      const done = await runningTask(oldToken);
      await bed.db.client.query(`UPDATE agent_tasks SET status = 'completed' WHERE id = $1`, [done]);

      const written = await steps.insertCompletedSteps([
        step(task, oldToken, 'x', 'from the old run'),
        step(done, oldToken, 'x', 'after the end'),
        step(task, newToken, 'y', 'from the new run'),
      ]);

      expect(written).toEqual([false, false, true]);
      expect(await completedStepsOfEveryTask()).toEqual([{ task_id: task, step_key: 'y', output: 'from the new run', completion_seq: 1 }]);
    });
  });

  describe('claim', () => {
    it('commits without waiting for its WAL flush, and leaves synchronous_commit and the planner settings as they were for everything else', async () => {
      const app = await bed.start({ duraflow: { worker: { enabled: false } } });
      const db = app.get(DuraflowDatabase, { strict: false });
      for (let i = 0; i < 4; i++) await bed.rows.insertTask('claimed', { i });

      const inside = await db.transaction(async (executor) => {
        const claimed = await new TaskTransitions(executor as DuraflowDatabase).claim('w', ['claimed'], 2);
        const { rows } = await executor.query(`SHOW synchronous_commit`);
        return { claimed: claimed.length, setting: rows[0].synchronous_commit };
      });
      expect(inside).toEqual({ claimed: 2, setting: 'off' });

      expect(await app.get(TaskTransitions, { strict: false }).claim('w', ['claimed'], 2)).toHaveLength(2);
      // Every pooled connection (ten at once take them all) is back to the server's settings.
      const settings = await Promise.all(
        Array.from({ length: 10 }, () =>
          db.query(
            `SELECT current_setting('synchronous_commit') AS sync, current_setting('enable_sort') AS sort, current_setting('enable_seqscan') AS seqscan`,
          ),
        ),
      );
      expect(settings.map(({ rows }) => rows[0])).toEqual(Array(10).fill({ sync: 'on', sort: 'on', seqscan: 'on' }));
      expect(await bed.rows.countByStatus()).toEqual({ running: 4 });
    });
  });

  describe('CheckpointBatcher', () => {
    it('writes a lone checkpoint at once and batches those that arrive meanwhile', async () => {
      const app = await bed.start({ duraflow: { worker: { enabled: false } } });
      const steps = app.get(StepStore, { strict: false });
      const batcher = app.get(CheckpointBatcher, { strict: false });
      const batches: number[] = [];
      const original = steps.insertCompletedSteps.bind(steps);
      jest.spyOn(steps, 'insertCompletedSteps').mockImplementation((items) => {
        batches.push(items.length);
        return original(items);
      });
      const tokens = Array.from({ length: 6 }, () => randomUUID());
      const ids: string[] = [];
      for (const token of tokens) ids.push(await runningTask(token));

      const results = await Promise.all(ids.map((id, index) => batcher.stepCompleted(step(id, tokens[index], 'only', index))));

      expect(results).toEqual([true, true, true, true, true, true]);
      expect(batches).toEqual([1, 5]);
      expect((await completedStepsOfEveryTask()).map((row) => row.output).sort()).toEqual([0, 1, 2, 3, 4, 5]);
    });

    it('writes the other steps of a batch when one of its rows already exists, and that one is not overwritten', async () => {
      const app = await bed.start({ duraflow: { worker: { enabled: false } } });
      const batcher = app.get(CheckpointBatcher, { strict: false });
      const tokens = [randomUUID(), randomUUID(), randomUUID()];
      const [first, twice, other] = [await runningTask(tokens[0]), await runningTask(tokens[1]), await runningTask(tokens[2])];
      // The step of `twice` was written by a try whose reply was lost.
      await bed.db.client.query(
        `INSERT INTO step_runs (task_id, step_key, status, output, completion_seq) VALUES ($1, 's', 'completed', '"kept"', 1)`,
        [twice],
      );

      const results = await Promise.all([
        batcher.stepCompleted(step(first, tokens[0], 's', 'first')), // written alone, at once
        batcher.stepCompleted(step(twice, tokens[1], 's', 'again')), // these two share a statement,
        batcher.stepCompleted(step(other, tokens[2], 's', 'other')), // which hits the existing row
      ]);

      expect(results).toEqual([true, false, true]);
      expect(await completedStepsOfEveryTask()).toEqual(
        [
          { task_id: first, step_key: 's', output: 'first', completion_seq: 1 },
          { task_id: twice, step_key: 's', output: 'kept', completion_seq: 1 },
          { task_id: other, step_key: 's', output: 'other', completion_seq: 1 },
        ].sort((x, y) => (x.task_id < y.task_id ? -1 : 1)),
      );
    });
  });

  describe('in the worker', () => {
    it('claims for, and completes, the runs that end in one event-loop turn with one statement each', async () => {
      const definition = workflow('instant', async (ctx: WorkflowContext<{ n: number }>) => ctx.input.n);
      const app = await bed.start({ duraflow: { worker: { enabled: false, concurrency: 4, prefetch: 0 }, workflows: [definition] } });
      const tasks = app.get(TaskTransitions, { strict: false });
      const claims: number[] = [];
      const completions: number[] = [];
      const claim = tasks.claim.bind(tasks);
      jest.spyOn(tasks, 'claim').mockImplementation(async (...args) => {
        const claimed = await claim(...args);
        claims.push(claimed.length);
        return claimed;
      });
      const complete = tasks.complete.bind(tasks);
      jest.spyOn(tasks, 'complete').mockImplementation((ids, ...rest) => (completions.push(ids.length), complete(ids, ...rest)));
      const workflows = app.get(WorkflowService);
      const submitted = await workflows.submitMany(
        'instant',
        Array.from({ length: 12 }, (_, n) => ({ n })),
      );

      await app.get(WorkerService).start();
      for (const task of submitted) expect((await workflows.waitFor(task.id, { timeoutMs: 15_000 })).status).toBe(TaskStatus.COMPLETED);

      // Four slots: every claim fills all four (not one per run that ended), and every completion
      // statement carries at least the four runs of one turn (two turns may share one).
      expect(claims.filter((n) => n > 0)).toEqual([4, 4, 4]);
      expect(completions.reduce((sum, n) => sum + n, 0)).toBe(12);
      expect(Math.min(...completions)).toBeGreaterThanOrEqual(4);
    });

    it('runs of one process share checkpoint, claim and completion statements, and every step is written once', async () => {
      const gate = { open: false, waiting: [] as Array<() => void> };
      const effects: string[] = [];
      const definition = workflow('batched', async (ctx: WorkflowContext<{ n: number }>) => {
        for (let s = 1; s <= 5; s++) {
          await ctx.step.run(`s${s}`, async () => {
            effects.push(`${ctx.input.n}/s${s}`);
            if (s === 1 && !gate.open) await new Promise<void>((resolve) => gate.waiting.push(resolve));
            return { n: ctx.input.n, s };
          });
        }
        return ctx.input.n;
      });
      const app = await bed.start({ duraflow: { worker: { enabled: false, concurrency: 10 }, workflows: [definition] } });
      const steps = app.get(StepStore, { strict: false });
      const tasks = app.get(TaskTransitions, { strict: false });
      const sizes = { checkpoints: [] as number[], claims: [] as number[], completions: [] as number[] };
      const insert = steps.insertCompletedSteps.bind(steps);
      jest.spyOn(steps, 'insertCompletedSteps').mockImplementation((items) => (sizes.checkpoints.push(items.length), insert(items)));
      const claim = tasks.claim.bind(tasks);
      jest.spyOn(tasks, 'claim').mockImplementation(async (...args) => {
        const claimed = await claim(...args);
        if (claimed.length) sizes.claims.push(claimed.length);
        return claimed;
      });
      const complete = tasks.complete.bind(tasks);
      jest.spyOn(tasks, 'complete').mockImplementation((ids, ...rest) => (sizes.completions.push(ids.length), complete(ids, ...rest)));

      const workflows = app.get(WorkflowService);
      const submitted = await workflows.submitMany(
        'batched',
        Array.from({ length: 10 }, (_, n) => ({ n })),
      );
      const worker = app.get(WorkerService);
      await worker.start();
      // All ten are claimed together and wait in their first step; then they go on at once.
      await eventually('all ten runs wait in their first step', () => gate.waiting.length === 10);
      gate.open = true;
      for (const resolve of gate.waiting.splice(0)) resolve();
      for (const task of submitted) expect((await workflows.waitFor(task.id, { timeoutMs: 15_000 })).status).toBe(TaskStatus.COMPLETED);

      expect(sizes.claims).toEqual([10]);
      expect(sizes.checkpoints.reduce((sum, n) => sum + n, 0)).toBe(50);
      expect(Math.max(...sizes.checkpoints)).toBeGreaterThan(1); // some statements carried several runs' steps
      expect(sizes.completions.reduce((sum, n) => sum + n, 0)).toBe(10);
      expect(effects).toHaveLength(50); // each step body ran once
      const { rows } = await bed.db.client.query(
        `SELECT task_id, count(*)::int AS n, array_agg(completion_seq ORDER BY completion_seq) AS seqs FROM step_runs
         WHERE status = 'completed' GROUP BY task_id`,
      );
      expect(rows).toHaveLength(10);
      for (const row of rows) expect(row).toMatchObject({ n: 5, seqs: [1, 2, 3, 4, 5] });
    });
  });
});
