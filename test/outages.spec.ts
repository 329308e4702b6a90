import { randomUUID } from 'node:crypto';
import { runInThisContext } from 'node:vm';
import { ScheduleModule } from '@nestjs/schedule';
import { TestingModule } from '@nestjs/testing';
import Redis from 'ioredis';
import {
  DuraflowModuleOptions,
  ReaperService,
  TaskStatus,
  WorkerService,
  workflow,
  WorkflowContext,
  WorkflowService,
} from '@duraflow/nestjs';
import { StepBarrier } from './fixtures/steps/barrier';
import { eventually, sleep } from './support/waiting';
import { SERVER_URL, terminateBackends, TestDatabase } from './support/database';
import { useTestBed } from './support/test-bed';
import { RedisServer } from './support/redis-server';
import { TcpProxy } from './support/tcp-proxy';

/**
 * Semantics 10 (outages): PostgreSQL connections killed or unreachable for a while, and Redis
 * unreachable, never crash the app, never lose a task, and work resumes by itself once they
 * are back. The app runs in this process; PostgreSQL is reached directly or through a TCP proxy
 * process the test owns (the shared server is never stopped), Redis is a private redis-server.
 * Only eventual facts are asserted, never durations.
 */

const WORKFLOW = 'outage';
const STEP_KEYS = ['a', 'b', 'c'] as const;
/** Generous: an outage, a reap and a re-run all fit in it many times over. */
const EVENTUALLY_MS = 30_000;

jest.setTimeout(60_000);

interface OutageInput {
  n: number;
  /** Which barrier step `b` waits at. */
  wave?: number;
}

interface OutageOutput {
  n: number;
  a: string;
  b: string;
  /** What step `b` saw as step `a`'s output: the memoized value, however many runs it took. */
  bSawA: string;
  c: string;
}

/**
 * Three steps, each recording a side effect (a fresh token) in `outage_effects` through the
 * test's own connection, which no outage touches; step `b` first waits at the barrier of its
 * wave, so the test decides when runs are in the middle of their work.
 */
function outageWorkflow(db: TestDatabase, barriers: StepBarrier[]) {
  // One statement at a time on the test's single connection (pg deprecates overlapping queries).
  let queue: Promise<unknown> = Promise.resolve();
  const record = (taskId: string, step: string, token: string): Promise<unknown> => {
    const insert = () =>
      db.client.query(`INSERT INTO outage_effects (task_id, step_key, token) VALUES ($1, $2, $3)`, [taskId, step, token]);
    const done = queue.then(insert, insert);
    queue = done.catch(() => undefined);
    return done;
  };
  return workflow(WORKFLOW, async (ctx: WorkflowContext<OutageInput>): Promise<OutageOutput> => {
    const effect = async (step: string): Promise<string> => {
      const token = randomUUID();
      await record(ctx.runId, step, token);
      return token;
    };
    const a = await ctx.step.run('a', async () => ({ token: await effect('a') }));
    const b = await ctx.step.run('b', async () => {
      await barriers[ctx.input.wave ?? 0].pass();
      return { token: await effect('b'), sawA: a.token };
    });
    const c = await ctx.step.run('c', async () => ({ token: await effect('c') }));
    return { n: ctx.input.n, a: a.token, b: b.token, bSawA: b.sawA, c: c.token };
  });
}

/** Short intervals, so several heartbeats, reaper ticks and polls fit in an outage. */
function outageOptions(overrides: { staleAfterMs?: number; redis?: DuraflowModuleOptions['redis']; leaderKey?: string } = {}) {
  return {
    worker: { concurrency: 10, pollIntervalMs: 50 },
    heartbeatIntervalMs: 100,
    reaper: {
      intervalMs: 200,
      staleAfterMs: overrides.staleAfterMs ?? 1_500,
      ...(overrides.leaderKey && { leaderKey: overrides.leaderKey }),
    },
    ...(overrides.redis && { redis: overrides.redis }),
  } satisfies DuraflowModuleOptions;
}

/**
 * Spies on the real process (Jest gives a test file a copy of `process` whose listeners never
 * fire): every unhandled rejection and uncaught exception while a test runs is kept.
 */
function watchProcessErrors(): { seen: string[]; dispose(): void } {
  const realProcess = runInThisContext('process') as NodeJS.Process;
  const seen: string[] = [];
  const show = (value: unknown) => (value instanceof Error ? (value.stack ?? value.message) : String(value));
  const onRejection = (reason: unknown) => seen.push(`unhandledRejection: ${show(reason)}`);
  const onException = (error: unknown) => seen.push(`uncaughtException: ${show(error)}`);
  realProcess.on('unhandledRejection', onRejection);
  realProcess.on('uncaughtException', onException);
  return {
    seen,
    dispose: () => {
      realProcess.off('unhandledRejection', onRejection);
      realProcess.off('uncaughtException', onException);
    },
  };
}

describe('Outages (semantics 10)', () => {
  const bed = useTestBed({ databasePerTest: true });
  let proxy: TcpProxy | undefined;
  let redisServer: RedisServer | undefined;
  let processErrors: ReturnType<typeof watchProcessErrors>;

  beforeEach(async () => {
    processErrors = watchProcessErrors();
    proxy = undefined;
    redisServer = undefined;
    // Whatever the test left down comes back first, so the apps close as they would in production.
    bed.beforeClosing(async () => {
      if (proxy && !proxy.running) await proxy.restart().catch(() => undefined);
      if (redisServer && !redisServer.running) await redisServer.restart().catch(() => undefined);
    });
    await bed.db.client.query(
      `CREATE TABLE outage_effects (id BIGSERIAL PRIMARY KEY, task_id UUID NOT NULL, step_key TEXT NOT NULL, token UUID NOT NULL)`,
    );
  });

  afterEach(() => {
    processErrors.dispose();
    // A crash of the host app would show here (the bed has closed everything by now).
    expect(processErrors.seen).toEqual([]);
  });

  /** An app (with ScheduleModule, as a host has it) connecting through `url`. */
  function startApp(url: string, duraflow: DuraflowModuleOptions): Promise<TestingModule> {
    return bed.start({ databaseUrl: url, imports: [ScheduleModule.forRoot()], duraflow });
  }

  async function submitAll(workflows: WorkflowService, inputs: OutageInput[], priority = 0): Promise<string[]> {
    const ids: string[] = [];
    for (const input of inputs) ids.push((await workflows.submit(WORKFLOW, input, { priority })).id);
    return ids;
  }

  function inputs(count: number, from: number, wave = 0): OutageInput[] {
    return Array.from({ length: count }, (_, i) => ({ n: from + i, wave }));
  }

  async function waitForCompleted(total: number): Promise<void> {
    let last: Record<string, number> = {};
    await eventually(
      `all ${total} tasks are completed`,
      async () => {
        last = await bed.rows.countByStatus();
        return last[TaskStatus.COMPLETED] === total;
      },
      { timeoutMs: EVENTUALLY_MS },
    ).catch((error: Error) => {
      throw new Error(`${error.message}; by status: ${JSON.stringify(last)}`);
    });
  }

  /** The worker's counters trail the database by a moment: wait until it has counted `completed` runs and holds none. */
  async function waitForWorkerCount(worker: WorkerService, completed: number): Promise<void> {
    await eventually(
      `the worker counted ${completed} completed runs`,
      () => worker.stats().completed === completed && worker.stats().running === 0,
      { timeoutMs: EVENTUALLY_MS },
    ).catch((error: Error) => {
      throw new Error(`${error.message}; stats: ${JSON.stringify(worker.stats())}`);
    });
  }

  /** The tasks whose step `a` is checkpointed (they ran up to step `b`). */
  async function tasksPastStepA(): Promise<string[]> {
    const { rows } = await bed.db.client.query<{ task_id: string }>(
      `SELECT task_id FROM step_runs WHERE step_key = 'a' AND status = 'completed' ORDER BY task_id`,
    );
    return rows.map((row) => row.task_id);
  }

  /**
   * Every task completed, with exactly the three steps checkpointed `completed`; its output is
   * made of its steps' saved outputs, each of which some execution of that step really produced
   * (a token in `outage_effects`), and step `b` saw step `a`'s saved output. Steps in
   * `exactlyOnce` (`<task>/<step>`, or every step) ran exactly once: memoization held through
   * the outage. Returns the problems found, so one failure lists them all.
   */
  async function checkRuns(ids: string[], exactlyOnce: 'all' | Set<string>): Promise<string[]> {
    const problems: string[] = [];
    const tasks = await bed.db.client.query<{ id: string; status: string; output: OutageOutput | null }>(
      `SELECT id, status, output FROM agent_tasks WHERE id = ANY($1::uuid[])`,
      [ids],
    );
    const steps = await bed.db.client.query<{ task_id: string; step_key: string; status: string; output: { token: string } | null }>(
      `SELECT task_id, step_key, status, output FROM step_runs WHERE task_id = ANY($1::uuid[])`,
      [ids],
    );
    const effects = await bed.db.client.query<{ task_id: string; step_key: string; token: string }>(
      `SELECT task_id, step_key, token FROM outage_effects WHERE task_id = ANY($1::uuid[])`,
      [ids],
    );
    if (tasks.rows.length !== ids.length) problems.push(`${ids.length - tasks.rows.length} task row(s) missing`);
    for (const task of tasks.rows) {
      const own = steps.rows.filter((step) => step.task_id === task.id);
      if (task.status !== TaskStatus.COMPLETED) problems.push(`${task.id}: status ${task.status}`);
      const keys = own.map((step) => `${step.step_key}:${step.status}`).sort();
      if (keys.join() !== 'a:completed,b:completed,c:completed') problems.push(`${task.id}: step_runs ${keys.join()}`);
      const output = task.output;
      for (const key of STEP_KEYS) {
        const saved = own.find((step) => step.step_key === key)?.output?.token;
        const produced = effects.rows
          .filter((effect) => effect.task_id === task.id && effect.step_key === key)
          .map((effect) => effect.token);
        if (!saved || !produced.includes(saved)) problems.push(`${task.id}/${key}: saved output ${saved} was produced by no execution`);
        if (output?.[key] !== saved)
          problems.push(`${task.id}/${key}: task output ${output?.[key]} is not the step's saved output ${saved}`);
        if ((exactlyOnce === 'all' || exactlyOnce.has(`${task.id}/${key}`)) && produced.length !== 1) {
          problems.push(`${task.id}/${key}: ran ${produced.length} times, expected once`);
        }
      }
      if (output?.bSawA !== output?.a) problems.push(`${task.id}: step b saw a = ${output?.bSawA}, a's output is ${output?.a}`);
    }
    return problems;
  }

  describe('PostgreSQL connections killed (pg_terminate_backend)', () => {
    /** Every backend of the test database but the test's own assertion connection: the app's pool, LISTEN and leader sessions. */
    async function terminateAppBackends(): Promise<number[]> {
      const { rows } = await bed.db.client.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`,
        [bed.db.name],
      );
      return terminateBackends(
        bed.db.client,
        rows.map((row) => row.pid),
      );
    }

    /** The backend of the app's LISTEN session, if there is one. */
    async function listenBackends(): Promise<number[]> {
      const { rows } = await bed.db.client.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid() AND query ILIKE 'LISTEN %'`,
        [bed.db.name],
      );
      return rows.map((row) => row.pid);
    }

    async function waitForNewListenSession(worker: WorkerService, killed: number[]): Promise<void> {
      await eventually(
        'the worker LISTENs again on a new session',
        async () => worker.stats().listening && (await listenBackends()).some((pid) => !killed.includes(pid)),
        { timeoutMs: EVENTUALLY_MS },
      );
    }

    it('loses no task and re-runs no checkpointed step when every app connection is killed with runs in flight and tasks pending, and LISTEN comes back', async () => {
      const waves = [new StepBarrier(), new StepBarrier()];
      // Nothing is reaped here: a stale threshold well above a loaded machine's pauses, so a
      // run is never taken over while the suite's other files load the cores.
      const app = await startApp(bed.db.url, { ...outageOptions({ staleAfterMs: 15_000 }), workflows: [outageWorkflow(bed.db, waves)] });
      const workflows = app.get(WorkflowService);
      const worker = app.get(WorkerService);
      await eventually('the worker LISTENs', async () => worker.stats().listening && (await listenBackends()).length === 1, {
        timeoutMs: EVENTUALLY_MS,
      });
      const firstListener = (await listenBackends())[0];

      // Wave 0 fills the pool and waits inside step b; wave 1 is queued behind it.
      const ids = [...(await submitAll(workflows, inputs(10, 0, 0), 1)), ...(await submitAll(workflows, inputs(10, 10, 1), 0))];
      await eventually('wave 0 waits in step b', () => waves[0].waiting === 10, { timeoutMs: EVENTUALLY_MS });
      expect(await bed.rows.countByStatus()).toEqual({ pending: 10, running: 10 });

      const killedFirst = await terminateAppBackends();
      expect(killedFirst).toContain(firstListener);
      await waitForNewListenSession(worker, killedFirst);

      // Wave 0 finishes on new connections; wave 1 is claimed and runs into its own barrier.
      waves[0].open();
      await eventually('wave 1 (pending during the kill) is claimed and waits in step b', () => waves[1].waiting === 10, {
        timeoutMs: EVENTUALLY_MS,
      });

      const killedSecond = await terminateAppBackends();
      expect(killedSecond.length).toBeGreaterThan(0);
      await waitForNewListenSession(worker, killedSecond);
      waves[1].open();

      await waitForCompleted(20);
      expect(await bed.rows.countByStatus()).toEqual({ completed: 20 });
      // No run was taken over by the reaper (a re-run after a reap may repeat an unrecorded step).
      expect(await bed.rows.count('agent_tasks', 'retry_count > 0')).toBe(0);
      // Every run waited for the kill at a barrier, so no write was cut off mid-flight: nothing ran twice.
      expect(await checkRuns(ids, 'all')).toEqual([]);
      await waitForWorkerCount(worker, 20);
      expect(worker.stats()).toMatchObject({ state: 'running', unrecorded: 0 });

      // And the app still takes new work.
      const after = await workflows.submit(WORKFLOW, { n: 100 });
      expect((await workflows.waitFor(after.id, { timeoutMs: EVENTUALLY_MS })).status).toBe(TaskStatus.COMPLETED);
    });
  });

  describe('PostgreSQL unreachable (the proxy process stopped, then restarted)', () => {
    /**
     * 20 tasks: 10 wait inside step b (step a checkpointed), 10 are pending. The proxy is
     * stopped, a submit fails, the runs go on during the outage; then it is restarted and 5
     * more tasks are submitted. Returns what the variants check further.
     */
    async function runThroughOutage(options: { staleAfterMs: number; outage: (worker: WorkerService) => Promise<unknown> }) {
      const server = new URL(SERVER_URL);
      proxy = bed.closeLater(await TcpProxy.start({ targetHost: server.hostname, targetPort: Number(server.port || 5432) }), (opened) =>
        opened.teardown(),
      );
      const barrier = new StepBarrier();
      const app = await startApp(proxy.proxiedUrl(bed.db.url), {
        ...outageOptions({ staleAfterMs: options.staleAfterMs }),
        workflows: [outageWorkflow(bed.db, [barrier])],
      });
      const workflows = app.get(WorkflowService);
      const worker = app.get(WorkerService);

      const batch = await submitAll(workflows, inputs(20, 0));
      await eventually('10 runs wait in step b', () => barrier.waiting === 10, { timeoutMs: EVENTUALLY_MS });
      const inFlight = await tasksPastStepA();
      expect(inFlight).toHaveLength(10);
      expect(await bed.rows.countByStatus()).toEqual({ pending: 10, running: 10 });

      await proxy.stop();

      // A submit during the outage is an error for its caller, not a crash, and writes nothing.
      await expect(workflows.submit(WORKFLOW, { n: -1 })).rejects.toThrow();
      expect(worker.stats().state).toBe('running');

      // The runs go on: their step b bodies finish while nothing can be written.
      barrier.open();
      await eventually('the runs passed the barrier', () => barrier.inFlight === 0, { timeoutMs: EVENTUALLY_MS });
      await options.outage(worker);
      // The database saw nothing of it: the app really was cut off.
      expect(await bed.rows.countByStatus()).toEqual({ pending: 10, running: 10 });
      expect(worker.stats().state).toBe('running');

      await proxy.restart();

      // The worker claims again: tasks submitted after the outage complete.
      const after = await submitAll(workflows, inputs(5, 100));
      await waitForCompleted(25);
      const { rows: half } = await bed.db.client.query(`SELECT id FROM agent_tasks WHERE (input->>'n')::int = -1`);
      expect(half).toEqual([]);
      expect(await bed.rows.countByStatus()).toEqual({ completed: 25 });
      await eventually('the worker LISTENs again', () => worker.stats().listening, { timeoutMs: EVENTUALLY_MS });
      expect(worker.stats().state).toBe('running');
      for (const id of [...batch, ...after]) expect((await workflows.get(id))?.status).toBe(TaskStatus.COMPLETED);

      const { rows: retries } = await bed.db.client.query<{ id: string; retry_count: number }>(
        `SELECT id, COALESCE(retry_count, 0) AS retry_count FROM agent_tasks`,
      );
      return { ids: [...batch, ...after], inFlight, worker, retries: new Map(retries.map((row) => [row.id, row.retry_count])) };
    }

    it('shorter than staleAfterMs: the runs hold their claims, their checkpoints land once it is back, no step runs twice', async () => {
      const { ids, worker, retries } = await runThroughOutage({
        staleAfterMs: 10_000,
        // Longer than many heartbeats (100 ms) and polls (50 ms), far shorter than staleAfterMs.
        outage: () => sleep(2_500),
      });

      expect(await checkRuns(ids, 'all')).toEqual([]);
      // Nothing went stale, so nothing was reaped: every task ran under its first claim.
      expect([...retries.values()].filter((count) => count !== 0)).toEqual([]);
      await waitForWorkerCount(worker, 25);
      expect(worker.stats().unrecorded).toBe(0);
    });

    it('longer than staleAfterMs: the runs give up, the reaper re-queues them once it is back, and they resume from their checkpoints', async () => {
      const { ids, inFlight, worker, retries } = await runThroughOutage({
        staleAfterMs: 1_500,
        // The proxy stays down until the worker has given up writing for all 10 runs.
        outage: (w) =>
          eventually('the worker gives up recording its 10 runs', () => w.stats().unrecorded >= 10, { timeoutMs: EVENTUALLY_MS }),
      });

      // Step b of the interrupted runs ran again (its checkpoint never landed); every other step once.
      const once = new Set(ids.flatMap((id) => STEP_KEYS.map((key) => `${id}/${key}`)));
      for (const id of inFlight) once.delete(`${id}/b`);
      expect(await checkRuns(ids, once)).toEqual([]);
      // The interrupted runs were recovered by the reaper (one more retry counted), not lost.
      expect(inFlight.filter((id) => (retries.get(id) ?? 0) < 1)).toEqual([]);
      expect(worker.stats().unrecorded).toBeGreaterThanOrEqual(10);
    });
  });

  describe('Redis unreachable', () => {
    it('loses the reaper leadership while Redis is away, keeps running tasks, and leads and reaps again once it is back', async () => {
      redisServer = bed.closeLater(await RedisServer.start(), (opened) => opened.teardown());
      const leaderKey = `duraflow:test:outage:${randomUUID()}`;
      const barrier = new StepBarrier();
      barrier.open();
      const app = await startApp(bed.db.url, {
        ...outageOptions({ redis: { url: redisServer.url }, leaderKey }),
        workflows: [outageWorkflow(bed.db, [barrier])],
      });
      const workflows = app.get(WorkflowService);
      const worker = app.get(WorkerService);
      const reaper = app.get(ReaperService);

      expect(reaper.electionKind).toBe('redis');
      await eventually('the app leads the reaper', () => reaper.isLeader(), { timeoutMs: EVENTUALLY_MS });
      const direct = new Redis(redisServer.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
      try {
        expect(await direct.get(leaderKey)).toBe(worker.workerId);
      } finally {
        direct.disconnect();
      }

      await redisServer.stop();
      await eventually('the app stops leading once Redis is gone', () => !reaper.isLeader(), { timeoutMs: EVENTUALLY_MS });

      // Workers do not need Redis.
      const during = await submitAll(workflows, inputs(5, 0));
      for (const id of during) expect((await workflows.waitFor(id, { timeoutMs: EVENTUALLY_MS })).status).toBe(TaskStatus.COMPLETED);

      // A task whose worker died long ago: only a leader may reap it, and nobody leads.
      const { rows } = await bed.db.client.query<{ id: string }>(
        `INSERT INTO agent_tasks (workflow_name, input, status, worker_id, claim_token, started_at, heartbeat_at, max_retries, retry_count)
         VALUES ($1, '{"n": 50}'::jsonb, 'running', 'dead-worker', gen_random_uuid(), now() - interval '1 hour', now() - interval '1 hour', 3, 0)
         RETURNING id`,
        [WORKFLOW],
      );
      const stale = rows[0].id;
      // Several reaper ticks (200 ms) go by without a leader: the stale task stays as it is.
      await sleep(1_000);
      expect(reaper.isLeader()).toBe(false);
      const { rows: untouched } = await bed.db.client.query(`SELECT status, retry_count, worker_id FROM agent_tasks WHERE id = $1`, [
        stale,
      ]);
      expect(untouched[0]).toEqual({ status: 'running', retry_count: 0, worker_id: 'dead-worker' });

      await redisServer.restart();
      await eventually('the app leads again once Redis is back', () => reaper.isLeader(), { timeoutMs: EVENTUALLY_MS });
      const back = new Redis(redisServer.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
      try {
        expect(await back.get(leaderKey)).toBe(worker.workerId);
      } finally {
        back.disconnect();
      }

      // The new leader reaps the stale task; a worker runs it to completion.
      const done = await workflows.waitFor(stale, { timeoutMs: EVENTUALLY_MS });
      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(done.retryCount).toBe(1);
      expect(await checkRuns([...during, stale], 'all')).toEqual([]);
      await waitForWorkerCount(worker, 6);
      expect(worker.stats()).toMatchObject({ state: 'running', unrecorded: 0 });
    });
  });
});
