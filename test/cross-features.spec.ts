import { TestingModule } from '@nestjs/testing';
import {
  ChildWorkflowFailedError,
  DuraflowModuleOptions,
  FunctionalWorkflowDefinition,
  SignalTimeoutError,
  TaskStatus,
  WorkerService,
  workflow,
  WorkflowContext,
  WorkflowService,
} from '@duraflow/nestjs';
import { replayCheck } from '@duraflow/nestjs/replay';
import { Gate } from './fixtures/steps/gate';
import { useTestBed } from './support/test-bed';
import { eventually, sleep } from './support/waiting';

/*
 * How the capabilities merged side by side work together, against PostgreSQL: the determinism
 * guard and the replay check over runs that slept, waited for a signal or started a child;
 * versions and flow-control keys of the tasks a parent or a schedule starts; a limited
 * workflow's slots while its runs wait. Code is "deployed" by closing the app, changing what the
 * workflow functions below do (`code`), and booting a new app on the same database, as
 * determinism-guard.spec.ts does.
 */

/** What the workflows below do on the next run: the code deployed now. */
type Code =
  'original' | 'patched' | 'sleep-first' | 'signal-first' | 'child-first' | 'run-child-first' | 'step-after-nap' | 'sleep-before-nap';
let code: Code = 'original';
/** The step bodies that ran, as `<taskId>:<key>`. */
let ran: string[] = [];
let gate = new Gate();

function ranFor(taskId: string): string[] {
  return ran.filter((entry) => entry.startsWith(`${taskId}:`)).map((entry) => entry.slice(taskId.length + 1));
}

function recordingStep<T>(ctx: WorkflowContext, key: string, output: T): Promise<T> {
  return ctx.step.run(key, () => {
    ran.push(`${ctx.runId}:${key}`);
    return output;
  });
}

/** A child that does one step. */
const leaf = workflow('leaf', async (ctx: WorkflowContext) => recordingStep(ctx, 'leaf-step', 'leaf-done'));

const failingLeaf = workflow('failing-leaf', async () => {
  throw Object.assign(new Error('leaf broke'), { code: 'LEAF_BROKE' });
});

/** Records `a`, sleeps `nap`, records `b`; other codes ask for a new wait before `a`, or a step after the nap. */
const swapped = workflow('swapped', async (ctx: WorkflowContext<{ napMs: number }>) => {
  if (code === 'sleep-first') await ctx.sleep('pre-nap', 0);
  if (code === 'patched' && ctx.patched('cool-down')) await ctx.sleep('cool-down', 0);
  if (code === 'signal-first') await ctx.waitForSignal('go');
  if (code === 'child-first') await ctx.startChild('pre-child', 'leaf', {});
  if (code === 'run-child-first') await ctx.runChild('pre-child', 'leaf', {});
  const a = await recordingStep(ctx, 'a', 'a-done');
  await ctx.sleep('nap', ctx.input.napMs);
  if (code === 'step-after-nap') await recordingStep(ctx, 'x', 'x-done');
  const b = await recordingStep(ctx, 'b', 'b-done');
  return [a, b];
});

/** Every primitive in turn, between two recorded steps. */
const allWaits = workflow('all-waits', async (ctx: WorkflowContext) => {
  await recordingStep(ctx, 'a', 'a-done');
  await ctx.sleep('nap', 300);
  const go = await ctx.waitForSignal<string>('go');
  const kid = await ctx.runChild<string>('kid', 'leaf', {});
  await ctx.startChild('background', 'leaf', {});
  const b = await recordingStep(ctx, 'b', 'b-done');
  return { go, kid, b };
});

/** Records `a`, a sleep of 0 ms (completed at once), then waits for `finish`; new code sleeps `extra` before the nap. */
const twoWaits = workflow('two-waits', async (ctx: WorkflowContext) => {
  await recordingStep(ctx, 'a', 'a-done');
  if (code === 'sleep-before-nap') await ctx.sleep('extra', 0);
  await ctx.sleep('nap', 0);
  const finish = await ctx.waitForSignal<string>('finish');
  return recordingStep(ctx, 'b', `b-${finish}`);
});

/** At most one running task; a run with `wait` waits for the signal `go` between its steps. */
const limitedWaiter = workflow(
  'limited-waiter',
  async (ctx: WorkflowContext<{ wait: boolean }>) => {
    if (code === 'sleep-first') await ctx.sleep('pre-nap', 0);
    await recordingStep(ctx, 'a', 'a-done');
    if (ctx.input.wait) await ctx.waitForSignal('go');
    return recordingStep(ctx, 'b', 'b-done');
  },
  { concurrency: 1 },
);

/** At most one running task; sleeps `napMs` between its steps, or holds its slot at the gate. */
const limitedNapper = workflow(
  'limited-napper',
  async (ctx: WorkflowContext<{ napMs?: number; gated?: boolean }>) => {
    await recordingStep(ctx, 'a', 'a-done');
    if (ctx.input.napMs !== undefined) await ctx.sleep('nap', ctx.input.napMs);
    if (ctx.input.gated) await ctx.step.run('at-gate', ({ signal }) => gate.wait(signal));
    return recordingStep(ctx, 'b', 'b-done');
  },
  { concurrency: 1 },
);

/** At most 2 starts an hour: a run that sleeps starts twice (its claim, then its wake-up). */
const rateLimitedNapper = workflow(
  'rate-limited-napper',
  async (ctx: WorkflowContext<{ napMs?: number }>) => {
    await recordingStep(ctx, 'a', 'a-done');
    if (ctx.input.napMs !== undefined) await ctx.sleep('nap', ctx.input.napMs);
    return recordingStep(ctx, 'b', 'b-done');
  },
  { rateLimit: { limit: 2, periodMs: 3_600_000 } },
);

/** At most one running task, and it runs a child of itself: the parent must give the slot to its child. */
const nested = workflow(
  'nested-limited',
  async (ctx: WorkflowContext<{ depth: number }>) => {
    if (ctx.input.depth === 0) return recordingStep(ctx, 'bottom', 0);
    const below = await ctx.runChild<number>('below', 'nested-limited', { depth: ctx.input.depth - 1 });
    return recordingStep(ctx, 'up', below + 1);
  },
  { concurrency: 1 },
);

/** One running task per tenant; each waits at the gate. */
const tenantJob = workflow(
  'tenant-job',
  async (ctx: WorkflowContext<{ tenant: string }>) => {
    await ctx.step.run('work', ({ signal }) => gate.wait(signal));
    return `worked-for-${ctx.input.tenant}`;
  },
  { concurrencyKey: (input: { tenant: string }) => input.tenant, keyConcurrency: 1 },
);

/** Starts three tenant jobs, two of one tenant, and ends. */
const fanOut = workflow('fan-out', async (ctx: WorkflowContext) => {
  const first = await ctx.startChild('acme-1', 'tenant-job', { tenant: 'acme' });
  const second = await ctx.startChild('acme-2', 'tenant-job', { tenant: 'acme' });
  const third = await ctx.startChild('globex-1', 'tenant-job', { tenant: 'globex' });
  return [first.id, second.id, third.id];
});

const versionedChildV1 = workflow('versioned-child', async () => ({ ranOn: 1 }));
const versionedChildV2 = workflow('versioned-child', async () => ({ ranOn: 2 }), { version: 2 });

const limitedV1 = workflow('limited-versioned', async () => ({ ranOn: 1 }), { concurrency: 1 });
const limitedV2 = workflow('limited-versioned', async () => ({ ranOn: 2 }), { version: 2, concurrency: 1 });

const parentOfVersioned = workflow('parent-of-versioned', async (ctx: WorkflowContext) => {
  const started = await ctx.startChild('started', 'versioned-child', {});
  const output = await ctx.runChild<{ ranOn: number }>('waited', 'versioned-child', {});
  return { started: started.id, output };
});

const ALL: FunctionalWorkflowDefinition[] = [
  leaf,
  failingLeaf,
  swapped,
  allWaits,
  twoWaits,
  limitedWaiter,
  limitedNapper,
  rateLimitedNapper,
  nested,
  tenantJob,
  fanOut,
  versionedChildV1,
  versionedChildV2,
  parentOfVersioned,
];

beforeEach(() => {
  code = 'original';
  ran = [];
  gate = new Gate();
});

describe('Cross-feature behaviour', () => {
  const bed = useTestBed({ databasePerTest: true });

  function startApp(duraflow: DuraflowModuleOptions = {}): Promise<TestingModule> {
    return bed.start({
      duraflow: { workflows: ALL, ...duraflow, worker: { pollIntervalMs: 20, shutdownTimeoutMs: 500, ...duraflow.worker } },
    });
  }

  async function stepStatus(taskId: string, key: string): Promise<string | undefined> {
    return (await bed.rows.steps(taskId)).find((step) => step.step_key === key)?.status;
  }

  async function untilWaitingAt(taskId: string, key: string): Promise<void> {
    await eventually(`task ${taskId} waits at ${key}`, async () => (await stepStatus(taskId, key)) === 'waiting');
  }

  /** Everything the run wrote: its step rows, its children, its signals (consumed or not). */
  async function written(taskId: string) {
    const steps = await bed.db.client.query(
      `SELECT step_key, kind, status, completion_seq, wake_at FROM step_runs WHERE task_id = $1 ORDER BY step_key`,
      [taskId],
    );
    const children = await bed.rows.count('agent_tasks', 'parent_task_id = $1', [taskId]);
    const signals = await bed.db.client.query(
      `SELECT name, consumed_at, consumed_by_step FROM task_signals WHERE task_id = $1 ORDER BY id`,
      [taskId],
    );
    return { steps: steps.rows, children, signals: signals.rows };
  }

  async function heldTask(taskId: string) {
    return eventually(`task ${taskId} is held`, async () => {
      const row = await bed.rows.task(taskId);
      return row.held_at ? row : undefined;
    });
  }

  describe('the determinism guard over durable primitives', () => {
    it.each([
      ['a new sleep', 'sleep-first', 'pre-nap'],
      ['a new signal wait', 'signal-first', 'signal:go#1'],
      ['a new startChild', 'child-first', 'pre-child'],
      ['a new runChild', 'run-child-first', 'pre-child'],
    ] as const)(
      'holds a recovered run whose new code asks for %s before a recorded step, writing nothing (no step, no child, no signal taken)',
      async (_what, newCode, requested) => {
        const first = await startApp();
        const workflows = first.get(WorkflowService);
        const task = await workflows.submit('swapped', { napMs: 1_000 });
        await untilWaitingAt(task.id, 'nap');
        // A signal the new code's wait could take, were it let through.
        await workflows.signal(task.id, 'go', { approved: true });
        await bed.close(first);
        const before = await written(task.id);
        expect(before.steps.map((step) => [step.step_key, step.status])).toEqual([
          ['a', 'completed'],
          ['nap', 'waiting'],
        ]);

        code = newCode;
        const second = await startApp();
        const held = await heldTask(task.id);

        expect(held.status).toBe('pending');
        expect(held.worker_id).toBeNull();
        expect(held.error).toMatchObject({ code: 'NON_DETERMINISM', recordedStep: 'a', requestedStep: requested });
        expect(await written(task.id)).toEqual(before);
        expect(before.children).toBe(0);
        expect(before.signals).toEqual([{ name: 'go', consumed_at: null, consumed_by_step: null }]);
        expect(ranFor(task.id)).toEqual(['a']);
        await eventually('the worker counted the hold', () => second.get(WorkerService).stats().held === 1);
        expect(second.get(WorkerService).stats()).toMatchObject({ held: 1, failed: 0, rolledBack: 0 });

        // The replay check reports what the guard held, with the same steps.
        const report = await replayCheck({ workflows: ALL, databaseUrl: bed.db.url, query: { workflowNames: ['swapped'] } });
        expect(report.diverged.map((run) => [run.taskId, run.recordedStep, run.requestedStep])).toEqual([[task.id, 'a', requested]]);

        // The fix deployed, resume runs it through its sleep to the end; `a` never runs again.
        code = 'original';
        await second.get(WorkflowService).resume(task.id);
        const done = await second.get(WorkflowService).waitFor(task.id, { timeoutMs: 20_000 });
        expect(done.status).toBe(TaskStatus.COMPLETED);
        expect(done.output).toEqual(['a-done', 'b-done']);
        expect(ranFor(task.id)).toEqual(['a', 'b']);
        expect(await bed.rows.count('agent_tasks', 'parent_task_id = $1', [task.id])).toBe(0);
      },
    );

    it('lets unchanged code resume a recovered run through its sleep, signal wait and children on new workers, without tripping', async () => {
      const first = await startApp();
      const task = await first.get(WorkflowService).submit('all-waits');
      await untilWaitingAt(task.id, 'nap');
      await bed.close(first);

      // Recovered on a new worker: past the sleep, to the signal wait.
      const second = await startApp();
      await untilWaitingAt(task.id, 'signal:go#1');
      expect(second.get(WorkerService).stats()).toMatchObject({ held: 0 });
      await bed.close(second);

      // And again: the signal, then a child waited for and one started.
      const third = await startApp();
      const workflows = third.get(WorkflowService);
      await workflows.signal(task.id, 'go', 'green');
      const done = await workflows.waitFor(task.id, { timeoutMs: 20_000 });
      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(done.output).toEqual({ go: 'green', kid: 'leaf-done', b: 'b-done' });
      expect(ranFor(task.id)).toEqual(['a', 'b']);
      expect(third.get(WorkerService).stats()).toMatchObject({ held: 0 });
      expect((await bed.rows.task(task.id)).held_at).toBeNull();
      expect((await workflows.getChildren(task.id)).map((child) => child.parentStepKey)).toEqual(['kid', 'background']);
      expect((await written(task.id)).signals).toMatchObject([{ name: 'go', consumed_by_step: 'signal:go#1' }]);
    });

    it('lets new code add a step after the recorded path (after the sleep the run waits at)', async () => {
      const first = await startApp();
      const task = await first.get(WorkflowService).submit('swapped', { napMs: 500 });
      await untilWaitingAt(task.id, 'nap');
      await bed.close(first);

      code = 'step-after-nap';
      const second = await startApp();
      const done = await second.get(WorkflowService).waitFor(task.id, { timeoutMs: 20_000 });
      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(ranFor(task.id)).toEqual(['a', 'x', 'b']);
      expect(second.get(WorkerService).stats()).toMatchObject({ held: 0 });
    });

    it('lets a new sleep guarded by ctx.patched pass a recovered run (recorded false) and sleep in a fresh run (recorded true)', async () => {
      const first = await startApp();
      const recovered = await first.get(WorkflowService).submit('swapped', { napMs: 500 });
      await untilWaitingAt(recovered.id, 'nap');
      await bed.close(first);

      code = 'patched';
      const second = await startApp();
      const workflows = second.get(WorkflowService);
      const fresh = await workflows.submit('swapped', { napMs: 0 });
      for (const id of [recovered.id, fresh.id]) {
        expect((await workflows.waitFor(id, { timeoutMs: 20_000 })).status).toBe(TaskStatus.COMPLETED);
      }
      expect(second.get(WorkerService).stats()).toMatchObject({ held: 0 });
      expect((await bed.rows.step(recovered.id, 'patch:cool-down')).output).toBe(false);
      expect((await bed.rows.steps(recovered.id)).map((step) => step.step_key)).not.toContain('cool-down');
      expect((await bed.rows.step(fresh.id, 'patch:cool-down')).output).toBe(true);
      expect(await bed.rows.step(fresh.id, 'cool-down')).toMatchObject({ kind: 'sleep', status: 'completed' });
      expect(ranFor(recovered.id)).toEqual(['a', 'b']);
      expect(ranFor(fresh.id)).toEqual(['a', 'b']);
    });

    it('counts a completed sleep as a recorded step: a new sleep before it holds the run woken by a signal, which its recorded wait took', async () => {
      const first = await startApp();
      const task = await first.get(WorkflowService).submit('two-waits');
      await untilWaitingAt(task.id, 'signal:finish#1');
      expect(await stepStatus(task.id, 'nap')).toBe('completed');
      await bed.close(first);
      const before = await written(task.id);

      code = 'sleep-before-nap';
      const second = await startApp();
      const receipt = await second.get(WorkflowService).signal(task.id, 'finish', 'now');
      expect(receipt.wokeTask).toBe(true);
      const held = await heldTask(task.id);
      expect(held.error).toMatchObject({ code: 'NON_DETERMINISM', recordedStep: 'nap', requestedStep: 'extra' });
      // The send hands the signal to the wait the run recorded and was suspended at (data of the
      // recorded path: no code of the new one ran); the woken run then diverges before it.
      const after = await written(task.id);
      expect(after.steps).toEqual(
        before.steps.map((step) =>
          step.step_key === 'signal:finish#1' ? { ...step, status: 'completed', completion_seq: expect.any(Number) } : step,
        ),
      );
      expect(after.signals).toEqual([{ name: 'finish', consumed_at: expect.any(Date), consumed_by_step: 'signal:finish#1' }]);
      // Another signal for the wait it is held at does not release it.
      await second.get(WorkflowService).signal(task.id, 'finish', 'again');
      await sleep(300);
      const stillHeld = await bed.rows.task(task.id);
      expect(stillHeld.held_at).not.toBeNull();
      expect(stillHeld.error).toMatchObject({ code: 'NON_DETERMINISM' });
      expect((await written(task.id)).steps).toEqual(after.steps);
      expect(ranFor(task.id)).toEqual(['a']);

      code = 'original';
      await second.get(WorkflowService).resume(task.id);
      const done = await second.get(WorkflowService).waitFor(task.id, { timeoutMs: 20_000 });
      expect(done.output).toBe('b-now');
      expect(ranFor(task.id)).toEqual(['a', 'b']);
      expect((await written(task.id)).signals).toMatchObject([
        { name: 'finish', consumed_by_step: 'signal:finish#1' },
        { name: 'finish', consumed_at: null },
      ]);
    });
  });

  describe('the replay check over durable primitives', () => {
    type ReplayCode = 'original' | 'reordered';
    let replayCode: ReplayCode = 'original';

    const sleeper = workflow('replay-sleeper', async (ctx: WorkflowContext<{ napMs: number }>) => {
      await ctx.step.run('a', () => 'a-done');
      if (replayCode === 'reordered') await ctx.step.run('pre', () => 'pre-done');
      await ctx.sleep('nap', ctx.input.napMs);
      return ctx.step.run('b', () => 'b-done');
    });
    const signalled = workflow('replay-signalled', async (ctx: WorkflowContext) => {
      await ctx.step.run('a', () => 'a-done');
      if (replayCode === 'reordered') await ctx.step.run('pre', () => 'pre-done');
      const go = await ctx.waitForSignal<{ n: number }>('go');
      let late = 'on time';
      try {
        await ctx.waitForSignal('late', { timeoutMs: 50 });
      } catch (error) {
        if (!(error instanceof SignalTimeoutError)) throw error;
        late = 'timed out';
      }
      await ctx.step.run('b', () => 'b-done');
      return { go: go.n, late };
    });
    const parent = workflow('replay-parent', async (ctx: WorkflowContext) => {
      await ctx.step.run('a', () => 'a-done');
      if (replayCode === 'reordered') await ctx.step.run('pre', () => 'pre-done');
      const leafOutput = await ctx.runChild<string>('kid', 'leaf', {});
      const started = await ctx.startChild('background', 'leaf', {});
      let failure = 'none';
      try {
        await ctx.runChild('breaks', 'failing-leaf', {});
      } catch (error) {
        if (!(error instanceof ChildWorkflowFailedError)) throw error;
        failure = error.status;
      }
      const b = await ctx.step.run('b', () => `b-after-${leafOutput}`);
      return { b, started: typeof started.id, failure };
    });
    const REPLAYED = [sleeper, signalled, parent, leaf, failingLeaf];
    const NAMES = ['replay-sleeper', 'replay-signalled', 'replay-parent'];

    afterEach(() => {
      replayCode = 'original';
    });

    it('replays runs that slept, took a signal (and timed out on one) or ran children as ok with unchanged code; a reorder before a recorded wait diverges', async () => {
      const app = await startApp({ workflows: REPLAYED });
      const workflows = app.get(WorkflowService);
      const slept = await workflows.submit('replay-sleeper', { napMs: 50 });
      const stillAsleep = await workflows.submit('replay-sleeper', { napMs: 600_000 });
      const signalledTask = await workflows.submit('replay-signalled');
      const parentTask = await workflows.submit('replay-parent');
      await untilWaitingAt(signalledTask.id, 'signal:go#1');
      await workflows.signal(signalledTask.id, 'go', { n: 7 });
      for (const id of [slept.id, signalledTask.id, parentTask.id]) {
        expect((await workflows.waitFor(id, { timeoutMs: 20_000 })).status).toBe(TaskStatus.COMPLETED);
      }
      expect((await workflows.get(signalledTask.id))!.output).toEqual({ go: 7, late: 'timed out' });
      expect((await workflows.get(parentTask.id))!.output).toEqual({ b: 'b-after-leaf-done', started: 'string', failure: 'failed' });
      await untilWaitingAt(stillAsleep.id, 'nap');
      await bed.close(app);
      const snapshot = await bed.db.client.query(`SELECT id, status, held_at FROM agent_tasks ORDER BY id`);

      const query = { includeFinished: true, workflowNames: NAMES };
      const unchanged = await replayCheck({ workflows: REPLAYED, databaseUrl: bed.db.url, query });
      const byTask = Object.fromEntries(unchanged.results.map((result) => [result.taskId, result]));
      expect(unchanged).toMatchObject({ checked: 4, ok: 4, diverged: [], errors: [], skipped: [] });
      expect(byTask[slept.id]).toMatchObject({ result: 'ok', reached: 'end' });
      expect(byTask[signalledTask.id]).toMatchObject({ result: 'ok', reached: 'end' });
      expect(byTask[parentTask.id]).toMatchObject({ result: 'ok', reached: 'end' });
      // Its sleep is not over: the replay stops there, at a wait the run has not got past.
      expect(byTask[stillAsleep.id]).toMatchObject({ result: 'ok', reached: 'new-step', newStep: 'nap' });

      replayCode = 'reordered';
      const reordered = await replayCheck({ workflows: REPLAYED, databaseUrl: bed.db.url, query });
      expect(reordered.diverged.map((run) => [run.taskId, run.recordedStep, run.requestedStep]).sort()).toEqual(
        [
          [slept.id, 'nap', 'pre'],
          [signalledTask.id, 'signal:go#1', 'pre'],
          [parentTask.id, 'kid', 'pre'],
        ].sort(),
      );
      // The run still asleep recorded nothing past `a`: a step before its sleep is new, and fine.
      expect(reordered.results.find((result) => result.taskId === stillAsleep.id)).toMatchObject({
        result: 'ok',
        reached: 'new-step',
        newStep: 'pre',
      });
      // Nothing was written by either check.
      expect((await bed.db.client.query(`SELECT id, status, held_at FROM agent_tasks ORDER BY id`)).rows).toEqual(snapshot.rows);
    });
  });

  describe('versions of child workflows', () => {
    it('starts a child (startChild and runChild) on the newest registered version, recorded in workflow_version', async () => {
      const app = await startApp();
      const workflows = app.get(WorkflowService);
      const task = await workflows.submit('parent-of-versioned');
      const done = await workflows.waitFor(task.id, { timeoutMs: 20_000 });
      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(done.output).toMatchObject({ output: { ranOn: 2 } });

      const children = await workflows.getChildren(task.id);
      expect(children.map((child) => [child.parentStepKey, child.workflowVersion])).toEqual([
        ['started', 2],
        ['waited', 2],
      ]);
      const { rows } = await bed.db.client.query(`SELECT workflow_version FROM agent_tasks WHERE parent_task_id = $1`, [task.id]);
      expect(rows.map((row) => row.workflow_version)).toEqual([2, 2]);
      const started = await workflows.waitFor((done.output as { started: string }).started, { timeoutMs: 20_000 });
      expect(started.output).toEqual({ ranOn: 2 });
    });
  });

  describe('versions in the limited claim', () => {
    it('claims only the versions a worker registers: a version 2 task waits for a worker of version 2, without taking the slot', async () => {
      const submitter = await startApp({ workflows: [limitedV1, limitedV2], worker: { enabled: false } });
      const workflows = submitter.get(WorkflowService);
      const oldWorker = await startApp({ workflows: [limitedV1] });
      const newer = await workflows.submit('limited-versioned', {});
      const older = await workflows.submit('limited-versioned', {}, { version: 1 });
      expect([newer.workflowVersion, older.workflowVersion]).toEqual([2, null]);
      expect([newer.concurrencyKey, older.concurrencyKey]).toEqual(['', '']);

      expect((await workflows.waitFor(older.id, { timeoutMs: 20_000 })).output).toEqual({ ranOn: 1 });
      await sleep(300);
      expect(await bed.rows.task(newer.id)).toMatchObject({ status: 'pending', started_at: null });
      // The old worker ran the version 1 task only (a task counts in stats a moment after its row completes).
      await eventually('the old worker counted its task', () => oldWorker.get(WorkerService).stats().completed === 1);

      const newWorker = await startApp({ workflows: [limitedV1, limitedV2] });
      expect((await workflows.waitFor(newer.id, { timeoutMs: 20_000 })).output).toEqual({ ranOn: 2 });
      await eventually('the new worker counted its task', () => newWorker.get(WorkerService).stats().completed === 1);
      expect(oldWorker.get(WorkerService).stats().completed).toBe(1);
    });
  });

  describe('flow control over waiting runs and children', () => {
    it('holds no slot for a run waiting for a signal; a held run holds none either, and the limited claim never takes it', async () => {
      const first = await startApp();
      const workflows = first.get(WorkflowService);
      const waiter = await workflows.submit('limited-waiter', { wait: true });
      await untilWaitingAt(waiter.id, 'signal:go#1');
      // concurrency 1: this one runs only because the waiting run gave its slot back.
      const other = await workflows.submit('limited-waiter', { wait: false });
      expect((await workflows.waitFor(other.id, { timeoutMs: 20_000 })).status).toBe(TaskStatus.COMPLETED);
      expect((await bed.rows.task(waiter.id)).status).toBe('pending');
      await bed.close(first);

      // A deploy that moves a sleep before the recorded steps: the woken run is held.
      code = 'sleep-first';
      const second = await startApp();
      const secondWorkflows = second.get(WorkflowService);
      await secondWorkflows.signal(waiter.id, 'go', {});
      const held = await heldTask(waiter.id);
      expect(held.error).toMatchObject({ code: 'NON_DETERMINISM', recordedStep: 'a', requestedStep: 'pre-nap' });
      expect(held.concurrency_key).toBe('');

      code = 'original';
      const third = await secondWorkflows.submit('limited-waiter', { wait: false });
      expect((await secondWorkflows.waitFor(third.id, { timeoutMs: 20_000 })).status).toBe(TaskStatus.COMPLETED);
      await sleep(200);
      const stillHeld = await bed.rows.task(waiter.id);
      expect(stillHeld).toMatchObject({ status: 'pending', worker_id: null });
      expect(stillHeld.held_at).not.toBeNull();
      expect(ranFor(waiter.id)).toEqual(['a']);
      // Taken at the send by the wait the run was suspended at (its recorded path), before the new code diverged.
      expect((await written(waiter.id)).signals).toEqual([{ name: 'go', consumed_at: expect.any(Date), consumed_by_step: 'signal:go#1' }]);

      await secondWorkflows.resume(waiter.id);
      const done = await secondWorkflows.waitFor(waiter.id, { timeoutMs: 20_000 });
      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(ranFor(waiter.id)).toEqual(['a', 'b']);
    });

    it('runs another task of a concurrency-1 workflow while a run sleeps, and the woken run waits for the slot', async () => {
      const app = await startApp({ worker: { concurrency: 4 } });
      const workflows = app.get(WorkflowService);
      const napper = await workflows.submit('limited-napper', { napMs: 800 });
      await untilWaitingAt(napper.id, 'nap');
      const holder = await workflows.submit('limited-napper', { gated: true });
      await gate.reached.promise;

      // The sleep is over, but the only slot is the holder's: the woken run stays pending.
      await eventually('the nap is due', async () => {
        const { rows } = await bed.db.client.query(
          `SELECT wake_at <= clock_timestamp() AS due FROM step_runs WHERE task_id = $1 AND step_key = 'nap'`,
          [napper.id],
        );
        return rows[0].due as boolean;
      });
      await sleep(300);
      expect(await bed.rows.count('agent_tasks', `workflow_name = 'limited-napper' AND status = 'running'`)).toBe(1);
      expect((await bed.rows.task(napper.id)).status).toBe('pending');
      expect(await stepStatus(napper.id, 'nap')).toBe('waiting');
      expect(ranFor(napper.id)).toEqual(['a']);

      gate.open();
      const [napperDone, holderDone] = await Promise.all([napper.id, holder.id].map((id) => workflows.waitFor(id, { timeoutMs: 20_000 })));
      expect([napperDone.status, holderDone.status]).toEqual([TaskStatus.COMPLETED, TaskStatus.COMPLETED]);
      const nap = await bed.rows.step(napper.id, 'nap');
      const holderRow = await bed.rows.task(holder.id);
      const napperB = await bed.rows.step(napper.id, 'b');
      // The holder was claimed while the napper slept, and the napper resumed after the holder ended.
      expect(new Date(holderRow.started_at).getTime()).toBeLessThan(new Date(nap.wake_at).getTime());
      expect(new Date(napperB.started_at).getTime()).toBeGreaterThanOrEqual(new Date(holderRow.completed_at).getTime());
      expect(ranFor(napper.id)).toEqual(['a', 'b']);
    });

    it('counts a sleeping run’s wake-up as a start of its rate limit (2 starts): the next task waits for the window', async () => {
      const app = await startApp();
      const workflows = app.get(WorkflowService);
      const napper = await workflows.submit('rate-limited-napper', { napMs: 100 });
      expect((await workflows.waitFor(napper.id, { timeoutMs: 20_000 })).status).toBe(TaskStatus.COMPLETED);
      const starts = await bed.db.client.query(`SELECT rate_key FROM flow_starts WHERE workflow_name = 'rate-limited-napper'`);
      expect(starts.rows).toEqual([{ rate_key: '' }, { rate_key: '' }]);

      const next = await workflows.submit('rate-limited-napper', {});
      await sleep(500);
      expect(await bed.rows.task(next.id)).toMatchObject({ status: 'pending', started_at: null, retry_count: 0 });
      expect(ranFor(next.id)).toEqual([]);
    });

    it('lets a concurrency-1 parent wait for a child of the same workflow: the waiting parent gives its slot to the child', async () => {
      const app = await startApp({ worker: { concurrency: 4 } });
      const workflows = app.get(WorkflowService);
      const top = await workflows.submit('nested-limited', { depth: 3 });
      const done = await workflows.waitFor(top.id, { timeoutMs: 20_000 });
      expect(done).toMatchObject({ status: TaskStatus.COMPLETED, output: 3 });
      const { rows } = await bed.db.client.query(
        `SELECT concurrency_key, status, started_at, completed_at FROM agent_tasks WHERE workflow_name = 'nested-limited'`,
      );
      expect(rows).toHaveLength(4);
      expect(rows.every((row) => row.concurrency_key === '' && row.status === 'completed')).toBe(true);
    });

    it('stores the concurrency key of a limited child and claims the children within their per-key limit', async () => {
      const app = await startApp({ worker: { concurrency: 5 } });
      const workflows = app.get(WorkflowService);
      const parent = await workflows.submit('fan-out');
      const done = await workflows.waitFor(parent.id, { timeoutMs: 20_000 });
      expect(done.status).toBe(TaskStatus.COMPLETED);
      const [acme1, acme2, globex] = done.output as string[];

      const keys = await bed.db.client.query(`SELECT id, concurrency_key FROM agent_tasks WHERE parent_task_id = $1`, [parent.id]);
      expect(Object.fromEntries(keys.rows.map((row) => [row.id, row.concurrency_key]))).toEqual({
        [acme1]: 'acme',
        [acme2]: 'acme',
        [globex]: 'globex',
      });
      expect((await workflows.get(acme1))!.concurrencyKey).toBe('acme');

      const statuses = async (): Promise<Record<string, string>> => {
        const { rows } = await bed.db.client.query(`SELECT id, status FROM agent_tasks WHERE id = ANY($1::uuid[])`, [
          [acme1, acme2, globex],
        ]);
        return Object.fromEntries(rows.map((row) => [row.id, row.status]));
      };
      await eventually('one acme child and the globex child run', async () => {
        const now = await statuses();
        return now[globex] === 'running' && [now[acme1], now[acme2]].sort().join() === 'pending,running';
      });
      await sleep(300);
      const held = await statuses();
      expect([held[acme1], held[acme2]].sort()).toEqual(['pending', 'running']);

      gate.open();
      for (const id of [acme1, acme2, globex]) {
        expect((await workflows.waitFor(id, { timeoutMs: 20_000 })).status).toBe(TaskStatus.COMPLETED);
      }
      // Never two of acme at once: the second acme child started after the first ended.
      const { rows } = await bed.db.client.query(
        `SELECT started_at, completed_at FROM agent_tasks WHERE id = ANY($1::uuid[]) ORDER BY started_at`,
        [[acme1, acme2]],
      );
      expect(new Date(rows[1].started_at).getTime()).toBeGreaterThanOrEqual(new Date(rows[0].completed_at).getTime());
    });
  });

  describe('schedules of versioned and limited workflows', () => {
    it('records the newest version on a scheduled task, and the concurrency key on a scheduled task of a keyed workflow', async () => {
      gate.open();
      const app = await startApp({
        schedules: [
          { name: 'versioned-every-second', workflow: 'versioned-child', cron: '* * * * * *', input: {} },
          { name: 'tenant-every-second', workflow: 'tenant-job', cron: '* * * * * *', input: { tenant: 'initech' } },
        ],
      });
      const workflows = app.get(WorkflowService);
      const firstOf = (schedule: string) =>
        eventually(`a tick of ${schedule} started a task`, async () => {
          const { rows } = await bed.db.client.query(
            `SELECT id, workflow_version, concurrency_key FROM agent_tasks WHERE idempotency_key LIKE $1 ORDER BY idempotency_key LIMIT 1`,
            [`schedule:${schedule}:%`],
          );
          return rows[0];
        });

      const versioned = await firstOf('versioned-every-second');
      expect(versioned).toMatchObject({ workflow_version: 2, concurrency_key: null });
      expect((await workflows.waitFor(versioned.id, { timeoutMs: 20_000 })).output).toEqual({ ranOn: 2 });

      const keyed = await firstOf('tenant-every-second');
      expect(keyed).toMatchObject({ workflow_version: null, concurrency_key: 'initech' });
      expect((await workflows.waitFor(keyed.id, { timeoutMs: 20_000 })).output).toBe('worked-for-initech');
    });
  });
});
