import {
  currentStepContext,
  DuraflowDashboardModule,
  InvalidDuraflowOptionsError,
  Step,
  StepContext,
  TaskStatus,
  Workflow,
  WorkflowContext,
  WorkflowService,
  workflow,
} from '@duraflow/nestjs';
import { useChaosBed } from './fixtures/chaos/chaos-bed';
import { KILL_IN_CHARGE_ENV } from './fixtures/chaos/effect-key-scenario';
import { OPERATOR_HEADERS, OperatorGuard } from './fixtures/dashboard/dashboard-app';
import { Gate } from './fixtures/steps/gate';
import { duraflowCli } from './support/duraflow-cli';
import { useTestBed } from './support/test-bed';

/*
 * Effect keys and the step option `recordStart` (issue 29 point 3, DESIGN.md "Round 3"): a step's
 * `effectKey` is one value per (task, step key), the same on every attempt and after a recovery in
 * another process; with `recordStart` the step's row is `running` before its body runs, so a crash
 * leaves it listed (CLI, dashboard) with its effect key, and the re-run completes it with that key.
 */

const WAIT = { timeoutMs: 60_000 };
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('effect keys in one process', () => {
  const bed = useTestBed();
  const MOUNT = '/ops/duraflow';
  const seen: Array<{ step: string; attempt: number; key: string }> = [];
  let failuresLeft = 0;
  let gate: Gate;

  const flaky = workflow('ek-flaky', async (ctx: WorkflowContext) => {
    const a = await ctx.step.run(
      'a',
      ({ attempt, effectKey }: StepContext) => {
        seen.push({ step: 'a', attempt, key: effectKey });
        if (failuresLeft-- > 0) throw new Error('fails by design');
        return effectKey;
      },
      { retries: 2, backoff: { initialDelayMs: 1 } },
    );
    const b = await ctx.step.run('b', ({ effectKey }) => effectKey);
    return { a, b };
  });

  const gated = workflow('ek-gated', async (ctx: WorkflowContext) =>
    ctx.step.run('charge', async ({ effectKey, signal }) => (await gate.wait(signal), effectKey), { recordStart: true }),
  );

  const undone: string[] = [];
  const saga = workflow(
    'ek-saga',
    async (ctx: WorkflowContext) => {
      await ctx.step.run('reserve', () => 'r');
      await ctx.step.run('charge', async ({ signal }) => gate.wait(signal), { recordStart: true });
    },
    { compensations: { reserve: () => void undone.push('reserve'), charge: () => void undone.push('charge') } },
  );

  const bad = workflow('ek-bad', (ctx: WorkflowContext) => ctx.step.run('x', () => 1, { recordStart: 'yes' as unknown as boolean }));

  @Workflow('ek-decorated')
  class DecoratedWorkflow {
    async run(ctx: WorkflowContext) {
      return { fromMethod: await this.charge(), runId: ctx.runId };
    }

    @Step('charge')
    async charge() {
      return currentStepContext()!.effectKey;
    }
  }

  let workflows: WorkflowService;
  let url: string;
  beforeAll(async () => {
    const app = await bed.serve({
      duraflow: { workflows: [flaky, gated, bad, saga], worker: { shutdownTimeoutMs: 100 } },
      providers: [DecoratedWorkflow],
      imports: [DuraflowDashboardModule.forRoot({ path: MOUNT, guards: [OperatorGuard] })],
    });
    workflows = app.app.get(WorkflowService);
    url = app.url;
  });

  it('is the same on every attempt of a step, different per step key and per task', async () => {
    seen.length = 0;
    failuresLeft = 2;
    const first = await workflows.submit('ek-flaky');
    const done = await workflows.waitFor(first.id, WAIT);
    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(seen.map((entry) => entry.attempt)).toEqual([1, 2, 3]);
    expect(new Set(seen.map((entry) => entry.key)).size).toBe(1);
    const { a, b } = done.output as { a: string; b: string };
    expect(a).toBe(seen[0].key);
    expect(a).toMatch(UUID);
    expect(b).toMatch(UUID);
    expect(b).not.toBe(a);

    const second = await workflows.waitFor((await workflows.submit('ek-flaky')).id, WAIT);
    expect((second.output as { a: string }).a).not.toBe(a);
  });

  it('reaches a @Step method through currentStepContext()', async () => {
    const decorated = await workflows.waitFor((await workflows.submit('ek-decorated')).id, WAIT);
    expect(decorated.status).toBe(TaskStatus.COMPLETED);
    const { fromMethod } = decorated.output as { fromMethod: string };
    expect(fromMethod).toMatch(UUID);
    // the same task's key for another step key differs; another task's `charge` differs
    const gatedTask = await workflows.submit('ek-gated');
    gate = new Gate();
    gate.open();
    const other = await workflows.waitFor(gatedTask.id, WAIT);
    expect(other.output).not.toBe(fromMethod);
  });

  it('with recordStart, writes the step running before its body, shows it on the dashboard, then completes that row', async () => {
    gate = new Gate();
    const task = await workflows.submit('ek-gated');
    await gate.reached.promise;
    const [row] = await workflows.getSteps(task.id);
    expect(row).toMatchObject({ stepKey: 'charge', status: 'running', attempt: 1 });
    expect(row.startedAt).toBeInstanceOf(Date);

    const page = await fetch(`${url}${MOUNT}/tasks/${task.id}`, { headers: OPERATOR_HEADERS });
    const text = await page.text();
    expect(page.status).toBe(200);
    expect(text).toContain('Started, never finished (1)');

    gate.open();
    const done = await workflows.waitFor(task.id, WAIT);
    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(text).toContain(done.output as string);
    const [completed] = await workflows.getSteps(task.id);
    expect(completed).toMatchObject({ stepKey: 'charge', status: 'completed', attempt: 1 });
    const after = await (await fetch(`${url}${MOUNT}/tasks/${task.id}`, { headers: OPERATOR_HEADERS })).text();
    expect(after).not.toContain('Started, never finished');
  });

  it('a rollback leaves a started, never finished step to the listing: it undoes only the completed ones', async () => {
    gate = new Gate();
    undone.length = 0;
    const task = await workflows.submit('ek-saga');
    await gate.reached.promise;
    await workflows.cancel(task.id, { compensate: true });
    const done = await workflows.waitFor(task.id, WAIT);
    expect(done).toMatchObject({ status: TaskStatus.CANCELLED, rollbackReason: 'cancelled' });
    expect(undone).toEqual(['reserve']);
    const steps = await workflows.getSteps(task.id);
    expect(steps.find((step) => step.stepKey === 'charge')).toMatchObject({ status: 'running', compensatedAt: null });
    const page = await (await fetch(`${url}${MOUNT}/tasks/${task.id}`, { headers: OPERATOR_HEADERS })).text();
    expect(page).toContain('Started, never finished (1)');
  });

  it('refuses a recordStart that is not a boolean, writing no step', async () => {
    const task = await workflows.waitFor((await workflows.submit('ek-bad')).id, WAIT);
    expect(task.status).toBe(TaskStatus.FAILED);
    expect(task.error?.code).toBe(new InvalidDuraflowOptionsError('step "x".recordStart', '').code);
    expect(task.error?.message).toContain('recordStart');
    expect(await workflows.getSteps(task.id)).toEqual([]);
  });
});

describe('effect keys across a SIGKILL', () => {
  const chaos = useChaosBed(['chaos-effect-key']);

  it('lists the started, never finished step after the crash (tasks show), and the re-run in another process completes it with the same key', async () => {
    const killed = chaos.startWorker({ label: 'killed', env: { [KILL_IN_CHARGE_ENV]: '1' } });
    const task = await chaos.workflows.submit('chaos-effect-key');
    expect((await killed.exited).signal).toBe('SIGKILL');
    const [started] = await chaos.steps(task.id);
    expect(started).toMatchObject({ stepKey: 'charge', status: 'running', attempt: 1 });

    const shown = await duraflowCli(['tasks', 'show', task.id], { DATABASE_URL: chaos.db.url });
    expect(shown.code).toBe(0);
    const [crashEffect] = await chaos.effects(task.id);
    const crashKey = crashEffect.step_key.replace('charge:', '');
    expect(shown.stdout).toContain('Started, never finished:');
    expect(shown.stdout).toContain(crashKey);
    const json = JSON.parse((await duraflowCli(['tasks', 'show', task.id, '--json'], { DATABASE_URL: chaos.db.url })).stdout);
    expect(json.steps[0]).toMatchObject({ key: 'charge', status: 'running', effectKey: crashKey });

    chaos.startWorker({ label: 'healthy' });
    const done = await chaos.workflows.waitFor(task.id, WAIT);
    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(done.output).toEqual({ charged: crashKey, after: expect.stringMatching(UUID) });
    expect((await chaos.effects(task.id)).map((effect) => effect.step_key)).toEqual([`charge:${crashKey}`, `charge:${crashKey}`]);
    const steps = await chaos.steps(task.id);
    expect(steps.find((step) => step.stepKey === 'charge')).toMatchObject({ status: 'completed', attempt: 2 });
  });
});
