import { TestingModule } from '@nestjs/testing';
import { AgentTask, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { CLI_TIMEOUT_MS, CliRun, duraflowCli as duraflow } from './support/duraflow-cli';
import { TestDatabase } from './support/database';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/** What a step's error says to rewrite the operator's terminal: a new window title (OSC), a cleared screen (CSI), a forged line. */
const TERMINAL_ATTACK = '\u001b]0;pwned\u0007\u001b[2J\u009b31m\u202eevil\r\nforged line';
/** C0 controls but the line feed, DEL, C1 controls, bidirectional overrides and isolates. */
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const CONTROL_CHARACTER = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;
const MISSING_ID = '00000000-0000-4000-8000-00000000dead';

/** How often the first step of `flaky` ran: a retry must not run it again. */
let flakyFirstRuns = 0;
/** Until this is true, `flaky`'s second step fails (the provider is down). */
let flakyFixed = false;

const ok = workflow('ok', async (ctx) => ctx.step.run('only', () => 'done'));
const flaky = workflow('flaky', async (ctx) => {
  await ctx.step.run('first', () => ++flakyFirstRuns);
  return ctx.step.run('second', () => {
    if (!flakyFixed) throw new Error(`provider down ${TERMINAL_ATTACK}`);
    return 'fixed';
  });
});
/** How often each step of `chain` and `per-tenant` ran: a fork must not run the steps it copied. */
const stepRuns: Record<string, number> = {};
const ran = (key: string) => (stepRuns[key] = (stepRuns[key] ?? 0) + 1);
const chain = workflow('chain', async (ctx: WorkflowContext<{ n: number }>) => {
  const a = await ctx.step.run('a', () => ran('chain.a') && ctx.input.n + 1);
  const b = await ctx.step.run('b', () => ran('chain.b') && a * 2);
  return ctx.step.run('c', () => ran('chain.c') && { result: b + 1 });
});
const perTenant = workflow(
  'per-tenant',
  async (ctx) => {
    await ctx.step.run('first', () => ran('per-tenant.first'));
    return ctx.step.run('second', () => ran('per-tenant.second'));
  },
  { concurrencyKey: (input: { tenant: string }) => input.tenant, keyConcurrency: 1 },
);
const waiter = workflow('waiter', async (ctx) => {
  await ctx.step.run('before', () => 'ready');
  return ctx.waitForSignal<unknown>('go');
});

/** A failure is one line on stderr naming the error's code, nothing on stdout, no stack trace. */
function expectFailure(run: CliRun, code: number, message: RegExp): void {
  expect(run).toMatchObject({ code, stdout: '' });
  expect(run.stderr).toMatch(/^duraflow: [^\n]+\n$/);
  expect(run.stderr).toMatch(message);
  expect(run.stderr).not.toMatch(/\n\s+at /);
}

describe('duraflow tasks', () => {
  const bed = useTestBed({ database: false });
  let db: TestDatabase;
  let app: TestingModule;
  let workflows: WorkflowService;
  let completed: AgentTask;
  let failed: AgentTask;
  let waiting: AgentTask;
  const cli = (...args: string[]) => duraflow(['tasks', ...args], { DATABASE_URL: db.url });
  const statusOf = async (id: string) => (await workflows.get(id))!.status;

  beforeAll(async () => {
    db = await bed.createDatabase({ migrate: true, prefix: 'duraflow_cli_tasks' });
    app = await bed.start({ databaseUrl: db.url, duraflow: { workflows: [ok, flaky, waiter, chain, perTenant] } });
    workflows = app.get(WorkflowService);
    completed = await workflows.submit('ok', {});
    failed = await workflows.submit('flaky', { n: 1 });
    waiting = await workflows.submit('waiter', {});
    await eventually('ok completes, flaky fails, waiter waits for its signal', async () => {
      const steps = await workflows.getSteps(waiting.id);
      return (
        (await statusOf(completed.id)) === 'completed' &&
        (await statusOf(failed.id)) === 'failed' &&
        steps.some((step) => step.stepKey !== 'before' && step.status !== 'completed')
      );
    });
  }, CLI_TIMEOUT_MS);

  describe('list', () => {
    it(
      'prints one JSON page with the filters as flags, and pages with --after',
      async () => {
        const all = await cli('list', '--json');
        expect(all).toMatchObject({ code: 0, stderr: '' });
        const page = JSON.parse(all.stdout);
        expect(page.items.map((task: { id: string }) => task.id)).toEqual(expect.arrayContaining([completed.id, failed.id, waiting.id]));
        expect(page.items.find((task: { id: string }) => task.id === failed.id)).toEqual({
          id: failed.id,
          workflowName: 'flaky',
          workflowVersion: null,
          status: 'failed',
          held: false,
          priority: 0,
          createdAt: failed.createdAt.toISOString(),
          startedAt: expect.any(String),
          completedAt: expect.any(String),
          retryCount: 0,
          parentTaskId: null,
          error: { code: 'STEP_FAILED', message: expect.stringContaining('provider down'), stepKey: 'second' },
          tags: {},
        });

        const byWorkflow = JSON.parse((await cli('list', '--json', '--workflow', 'flaky')).stdout);
        expect(byWorkflow.items.map((task: { id: string }) => task.id)).toEqual([failed.id]);
        const byStatuses = JSON.parse((await cli('list', '--json', '--status', 'failed,completed')).stdout);
        expect(byStatuses.items.map((task: { status: string }) => task.status).sort()).toEqual(['completed', 'failed']);
        const repeated = JSON.parse((await cli('list', '--json', '--status', 'failed', '--status=pending')).stdout);
        expect(repeated.items.map((task: { id: string }) => task.id).sort()).toEqual([failed.id, waiting.id].sort());
        const otherVersion = JSON.parse((await cli('list', '--json', '--version', '2')).stdout);
        expect(otherVersion).toEqual({ items: [], nextCursor: null });
        const later = JSON.parse((await cli('list', '--json', '--created-after', new Date(Date.now() + 60_000).toISOString())).stdout);
        expect(later.items).toEqual([]);

        const first = JSON.parse((await cli('list', '--json', '--workflow', 'ok', '--limit', '1')).stdout);
        expect(first.items).toHaveLength(1);
        const extra = await workflows.submit('ok', {});
        const newest = JSON.parse((await cli('list', '--json', '--workflow', 'ok', '--limit', '1')).stdout);
        expect(newest.items[0].id).toBe(extra.id);
        const next = JSON.parse((await cli('list', '--json', '--workflow', 'ok', '--limit', '1', '--after', newest.nextCursor)).stdout);
        expect(next).toEqual({ items: [expect.objectContaining({ id: completed.id })], nextCursor: null });
      },
      CLI_TIMEOUT_MS * 4,
    );

    it(
      'filters on --tag key:value, repeated as an AND; a bad pair is a usage error',
      async () => {
        const later = new Date(Date.now() + 3_600_000);
        const eu = await workflows.submit('ok', {}, { scheduledAt: later, tags: { tenant: 'cli-acme', region: 'eu' } });
        const us = await workflows.submit('ok', {}, { scheduledAt: later, tags: { tenant: 'cli-acme', region: 'us' } });
        const ids = async (...args: string[]) =>
          JSON.parse((await cli('list', '--json', ...args)).stdout).items.map((t: { id: string }) => t.id);
        expect(await ids('--tag', 'tenant:cli-acme')).toEqual([us.id, eu.id]);
        expect(await ids('--tag', 'tenant:cli-acme', '--tag=region:eu')).toEqual([eu.id]);
        const listed = JSON.parse((await cli('list', '--json', '--tag', 'region:us')).stdout).items;
        expect(listed).toEqual([expect.objectContaining({ id: us.id, tags: { tenant: 'cli-acme', region: 'us' } })]);
        const bad = await cli('list', '--tag', 'tenant');
        expect(bad.code).toBe(2);
        expect(bad.stderr).toContain('--tag');
        expect((await cli('show', eu.id, '--tag', 'a:b')).code).toBe(2);
      },
      CLI_TIMEOUT_MS * 4,
    );

    it(
      'prints a table for people, a step error that would rewrite the terminal shown as escapes',
      async () => {
        const run = await cli('list', '--workflow', 'flaky');
        expect(run).toMatchObject({ code: 0, stderr: '' });
        expect(run.stdout).toMatch(/^id\s+workflow\s+version\s+status\s+created\s+error\n/);
        expect(run.stdout).toContain(failed.id);
        expect(run.stdout).not.toMatch(CONTROL_CHARACTER);
        expect(run.stdout).toContain('\\u001b]0;pwned\\u0007');
        expect(run.stdout.split('\n').filter((line) => line.includes(failed.id))).toEqual([expect.stringContaining('forged line')]);

        const json = await cli('list', '--json', '--workflow', 'flaky');
        expect(json.stdout).not.toMatch(CONTROL_CHARACTER);
        expect(JSON.parse(json.stdout).items[0].error.message).toContain(TERMINAL_ATTACK);
      },
      CLI_TIMEOUT_MS * 2,
    );
  });

  describe('show', () => {
    it(
      'prints the task, its steps with their attempts and durations, its signals and its dead letters',
      async () => {
        const run = await cli('show', failed.id, '--json');
        expect(run).toMatchObject({ code: 0, stderr: '' });
        const report = JSON.parse(run.stdout);
        expect(report.task).toMatchObject({ id: failed.id, workflowName: 'flaky', status: 'failed', input: { n: 1 } });
        expect(report.task).not.toHaveProperty('claimToken');
        expect(report.steps).toEqual([
          expect.objectContaining({
            key: 'first',
            kind: null,
            status: 'completed',
            attempts: 1,
            durationMs: expect.any(Number),
            error: null,
          }),
          expect.objectContaining({ key: 'second', status: 'failed', attempts: 1, error: expect.stringContaining('provider down') }),
        ]);
        expect(report.signals).toEqual({ items: [], more: false });
        expect(report.deadLetters).toEqual({ items: [], more: false });

        const text = await cli('show', failed.id);
        expect(text).toMatchObject({ code: 0, stderr: '' });
        expect(text.stdout).toContain(`Task ${failed.id}`);
        expect(text.stdout).toMatch(/\n {2}first\s+completed\s+1\s+\d+ ms\n/);
        expect(text.stdout).not.toMatch(CONTROL_CHARACTER);
        expect(text.stdout).toContain('Signals: none');
      },
      CLI_TIMEOUT_MS * 2,
    );

    it(
      'answers an unknown task with TASK_NOT_FOUND and exit code 1',
      async () => {
        expectFailure(await cli('show', MISSING_ID), 1, /TASK_NOT_FOUND: No task with id "00000000-0000-4000-8000-00000000dead"/);
        expectFailure(await cli('show', 'not-a-task', '--json'), 1, /TASK_NOT_FOUND/);
      },
      CLI_TIMEOUT_MS * 2,
    );
  });

  describe('signal, resume and cancel', () => {
    it(
      'sends a signal with its JSON payload, and the running worker finishes the waiting task with it',
      async () => {
        const sent = await cli('signal', waiting.id, 'go', '--payload', '{"approved":true}', '--json');
        expect(sent).toMatchObject({ code: 0, stderr: '' });
        expect(JSON.parse(sent.stdout)).toEqual({ signalId: expect.any(String), taskId: waiting.id, name: 'go', wokeTask: true });
        const done = await workflows.waitFor(waiting.id, { timeoutMs: 30_000 });
        expect(done).toMatchObject({ status: 'completed', output: { approved: true } });

        const shown = JSON.parse((await cli('show', waiting.id, '--json')).stdout);
        expect(shown.signals.items).toEqual([
          expect.objectContaining({ name: 'go', payloadPreview: '{"approved": true}', consumedByStep: expect.any(String) }),
        ]);
        expectFailure(await cli('signal', waiting.id, 'go'), 1, /TASK_ALREADY_FINISHED/);
        expectFailure(await cli('signal', waiting.id, 'go', '--payload', '{oops'), 2, /--payload is not JSON/);
      },
      CLI_TIMEOUT_MS * 4,
    );

    it(
      'resumes a held task, which the running worker then runs; a task not held is refused',
      async () => {
        const task = await workflows.submit('ok', {}, { scheduledAt: new Date(Date.now() + 3_600_000) });
        await db.client.query(
          `UPDATE agent_tasks SET held_at = now(), scheduled_at = now(),
             error = '{"code":"NON_DETERMINISM","name":"NonDeterminismError","message":"took another path"}'
           WHERE id = $1`,
          [task.id],
        );
        const held = JSON.parse((await cli('list', '--json', '--held')).stdout);
        expect(held.items).toEqual([expect.objectContaining({ id: task.id, held: true })]);

        const run = await cli('resume', task.id);
        expect(run).toMatchObject({ code: 0, stderr: '' });
        expect(run.stdout).toMatch(/^Resumed [0-9a-f-]+ \(ok\): the workers run it again\n$/);
        expect(await workflows.waitFor(task.id, { timeoutMs: 30_000 })).toMatchObject({ status: 'completed', heldAt: null });
        expectFailure(await cli('resume', task.id), 1, /TASK_NOT_HELD/);
        expectFailure(await cli('resume', MISSING_ID), 1, /TASK_NOT_FOUND/);
      },
      CLI_TIMEOUT_MS * 4,
    );

    it(
      'refuses cancel --compensate with how to run it, writing nothing; cancels without it',
      async () => {
        const task = await workflows.submit('waiter', {});
        await eventually('it waits for its signal', async () => (await workflows.getSteps(task.id)).length === 2);
        const before = (await db.client.query('SELECT status, updated_at FROM agent_tasks WHERE id = $1', [task.id])).rows[0];

        const refused = await cli('cancel', task.id, '--compensate', '--json');
        expectFailure(refused, 1, /NEEDS_APPLICATION: .*nothing was changed/);
        expect(refused.stderr).toContain(`workflows.cancel('${task.id}', { compensate: true })`);
        expect(refused.stderr).toContain(`POST /tasks/${task.id}/cancel?compensate=true`);
        expect(refused.stderr).toContain('dashboard');
        const after = (await db.client.query('SELECT status, updated_at FROM agent_tasks WHERE id = $1', [task.id])).rows[0];
        expect(after).toEqual(before);

        const cancelled = await cli('cancel', task.id, '--json');
        expect(cancelled).toMatchObject({ code: 0, stderr: '' });
        expect(JSON.parse(cancelled.stdout)).toMatchObject({ previousStatus: 'pending', task: { id: task.id, status: 'cancelled' } });
        expect(await statusOf(task.id)).toBe('cancelled');
        expectFailure(await cli('cancel', task.id), 1, /TASK_ALREADY_FINISHED: .*"cancelled"/);
      },
      CLI_TIMEOUT_MS * 4,
    );
  });

  describe('retry and fork', () => {
    it(
      'retries a failed task: the running worker runs it on from its failed step, its completed step not again',
      async () => {
        expect(flakyFirstRuns).toBe(1);
        flakyFixed = true;
        const run = await cli('retry', failed.id, '--json');
        expect(run).toMatchObject({ code: 0, stderr: '' });
        // The task as read right after the move: the running worker may have claimed (or even finished) it already.
        expect(JSON.parse(run.stdout).task).toMatchObject({
          id: failed.id,
          status: expect.stringMatching(/^(pending|running|completed)$/),
        });
        expect(JSON.parse(run.stdout).task.status === 'completed' || JSON.parse(run.stdout).task.error === null).toBe(true);
        expect(await workflows.waitFor(failed.id, { timeoutMs: 30_000 })).toMatchObject({ status: 'completed', output: 'fixed' });
        expect(flakyFirstRuns).toBe(1);

        expectFailure(await cli('retry', failed.id), 1, /TASK_NOT_RETRYABLE: Task "[0-9a-f-]+" is "completed" and cannot be retried/);
        expectFailure(await cli('retry', MISSING_ID), 1, /TASK_NOT_FOUND/);
      },
      CLI_TIMEOUT_MS * 3,
    );

    it(
      'forks a completed task from a step: the worker runs the fork from that step, never the steps before it',
      async () => {
        const original = await workflows.submit('chain', { n: 4 });
        expect(await workflows.waitFor(original.id, { timeoutMs: 30_000 })).toMatchObject({ status: 'completed', output: { result: 11 } });
        expect(stepRuns).toMatchObject({ 'chain.a': 1, 'chain.b': 1, 'chain.c': 1 });

        const run = await cli('fork', original.id, '--from-step', 'b', '--json');
        expect(run).toMatchObject({ code: 0, stderr: '' });
        const report = JSON.parse(run.stdout);
        expect(report).toEqual({ task: expect.objectContaining({ workflowName: 'chain', input: { n: 4 } }), copiedSteps: 1 });
        expect(report.task.id).not.toBe(original.id);
        expect(report.task.forkedFrom).toEqual({ taskId: original.id, fromStep: 'b' });
        expect(report.task).not.toHaveProperty('claimToken');
        expect(await workflows.waitFor(report.task.id, { timeoutMs: 30_000 })).toMatchObject({
          status: 'completed',
          output: { result: 11 },
          forkedFrom: { taskId: original.id, fromStep: 'b' },
        });
        expect(stepRuns).toMatchObject({ 'chain.a': 1, 'chain.b': 2, 'chain.c': 2 });

        const text = await cli('fork', original.id, '--from-step', 'c');
        expect(text).toMatchObject({ code: 0, stderr: '' });
        expect(text.stdout).toMatch(/^Forked [0-9a-f-]+ \(chain\) from step "c": new task [0-9a-f-]+, 2 steps copied as done/);
        expect(text.stdout).toMatch(/\nid\s+workflow\s+version\s+status\s+created\s+error\n/);
        const forkId = /new task ([0-9a-f-]+)/.exec(text.stdout)![1];
        expect(await workflows.waitFor(forkId, { timeoutMs: 30_000 })).toMatchObject({ status: 'completed', output: { result: 11 } });
        expect(stepRuns).toMatchObject({ 'chain.a': 1, 'chain.b': 2, 'chain.c': 3 });

        const shown = await cli('show', forkId);
        expect(shown.stdout).toContain(`forked from  ${original.id} (step c)`);
        expect(JSON.parse((await cli('show', forkId, '--json')).stdout).task.forkedFrom).toEqual({ taskId: original.id, fromStep: 'c' });
      },
      CLI_TIMEOUT_MS * 5,
    );

    it(
      "keeps a flow-limited workflow's concurrency key on the fork, which the limited claim then runs",
      async () => {
        const original = await workflows.submit('per-tenant', { tenant: 'acme' });
        expect(await workflows.waitFor(original.id, { timeoutMs: 30_000 })).toMatchObject({ status: 'completed', concurrencyKey: 'acme' });

        const run = await cli('fork', original.id, '--from-step', 'second', '--json');
        expect(run).toMatchObject({ code: 0, stderr: '' });
        const { task } = JSON.parse(run.stdout);
        expect(task).toMatchObject({ concurrencyKey: 'acme', input: { tenant: 'acme' }, workflowName: 'per-tenant' });
        const row = await db.client.query('SELECT concurrency_key FROM agent_tasks WHERE id = $1', [task.id]);
        expect(row.rows).toEqual([{ concurrency_key: 'acme' }]);
        expect(await workflows.waitFor(task.id, { timeoutMs: 30_000 })).toMatchObject({ status: 'completed' });
        expect(stepRuns).toMatchObject({ 'per-tenant.first': 1, 'per-tenant.second': 2 });
      },
      CLI_TIMEOUT_MS * 3,
    );

    it(
      'answers an unknown task or step with its code and exit code 1, writing nothing',
      async () => {
        const counts = async () =>
          (
            await db.client.query(
              `SELECT (SELECT count(*)::int FROM agent_tasks) AS tasks, (SELECT count(*)::int FROM step_runs) AS steps,
                      (SELECT history FROM agent_tasks WHERE id = $1) AS history`,
              [completed.id],
            )
          ).rows;
        const before = await counts();
        expectFailure(
          await cli('fork', completed.id, '--from-step', 'nope'),
          1,
          /FORK_STEP_UNKNOWN: Task "[0-9a-f-]+" recorded no step "nope"/,
        );
        expectFailure(await cli('fork', MISSING_ID, '--from-step', 'only', '--json'), 1, /TASK_NOT_FOUND/);
        expectFailure(await cli('fork', 'not-a-task', '--from-step', 'only'), 1, /TASK_NOT_FOUND/);
        expectFailure(await cli('fork', completed.id), 2, /tasks fork needs --from-step <key>/);
        expect(await counts()).toEqual(before);
      },
      CLI_TIMEOUT_MS * 4,
    );

    it(
      'refuses a fork on another input or version with how to run it, writing nothing',
      async () => {
        const before = await db.client.query('SELECT count(*)::int AS tasks FROM agent_tasks');
        const refused = await cli('fork', completed.id, '--from-step', 'only', '--input', '{"n":2}');
        expectFailure(refused, 1, /NEEDS_APPLICATION: .*nothing was written/);
        expect(refused.stderr).toContain(`workflows.fork('${completed.id}', { fromStep: "only", input, version })`);
        expect(refused.stderr).toContain(`POST /tasks/${completed.id}/fork`);
        expectFailure(await cli('fork', completed.id, '--from-step', 'only', '--version', '2'), 1, /NEEDS_APPLICATION/);
        expect((await db.client.query('SELECT count(*)::int AS tasks FROM agent_tasks')).rows).toEqual(before.rows);
      },
      CLI_TIMEOUT_MS * 3,
    );
  });

  describe('exit codes', () => {
    it.each<[string, string[], number, RegExp]>([
      ['an unknown subcommand', ['lst'], 2, /CLI_USAGE: Unknown subcommand "tasks lst"/],
      ['an unknown status', ['list', '--status', 'done'], 2, /--status "done" is not a status/],
      ['a flag the subcommand does not take', ['show', MISSING_ID, '--limit', '3'], 2, /tasks show takes no --limit/],
      ['a missing operand', ['signal', MISSING_ID], 2, /tasks signal takes <id> <name>/],
      ['a limit out of range', ['list', '--limit', '5000'], 2, /INVALID_LIST_OPTIONS/],
      ['a cursor it did not make', ['list', '--after', 'nope'], 2, /INVALID_CURSOR/],
      ['a bad time', ['list', '--created-after', 'yesterday'], 2, /INVALID_LIST_OPTIONS/],
    ])(
      'exits 2 for %s',
      async (_, args, code, message) => {
        expectFailure(await cli(...args), code, message);
      },
      CLI_TIMEOUT_MS,
    );

    it(
      'exits 3 when the database cannot be reached, and 2 without a database',
      async () => {
        const unreachable = await duraflow(['tasks', 'list', '--url', 'postgres://postgres@127.0.0.1:1/none']);
        expectFailure(unreachable, 3, /DATABASE_UNREACHABLE: Cannot connect to PostgreSQL at 127\.0\.0\.1:1/);
        expectFailure(await duraflow(['tasks', 'list']), 2, /INVALID_DATABASE_URL: No database given/);
      },
      CLI_TIMEOUT_MS * 2,
    );

    it(
      'prints its usage with exit code 0',
      async () => {
        const run = await duraflow(['tasks', '--help']);
        expect(run).toMatchObject({ code: 0, stderr: '' });
        expect(run.stdout).toMatch(/^Usage: duraflow tasks <subcommand>/);
        expect(run.stdout).toContain('Exit codes: 0 done; 1 refused or not found');
      },
      CLI_TIMEOUT_MS,
    );
  });
});
