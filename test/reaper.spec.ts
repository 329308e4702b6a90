import { randomUUID } from 'node:crypto';
import { ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import { TestingModule } from '@nestjs/testing';
import Redis from 'ioredis';
import {
  DuraflowModuleOptions,
  REAPER_INTERVAL_NAME,
  ReaperService,
  TaskStatus,
  workflow,
  WorkflowContext,
  WorkflowService,
} from '@duraflow/nestjs';
import { TaskTransitions } from '../libs/duraflow/src/persistence/lifecycle/task-transitions';
import { StepBarrier } from './fixtures/steps/barrier';
import { SHARED_REDIS_URL } from './support/redis-server';
import { useTestBed } from './support/test-bed';
import { eventually, sleep } from './support/waiting';

/** Fast reaper settings; the leader key is unique per test so parallel files never share it. */
function reaperOptions(overrides: DuraflowModuleOptions['reaper'] = {}): DuraflowModuleOptions['reaper'] {
  return { intervalMs: 100, staleAfterMs: 400, leaderTtlMs: 1_000, leaderKey: `duraflow:test:${randomUUID()}`, ...overrides };
}

describe('ReaperService', () => {
  const bed = useTestBed({ databasePerTest: true });

  /** A task as a worker that died mid-run leaves it: running, its heartbeat `ageMs` old. */
  async function insertStaleTask(options: { retryCount?: number; maxRetries?: number; ageMs?: number } = {}): Promise<string> {
    const { rows } = await bed.db.client.query<{ id: string }>(
      `INSERT INTO agent_tasks (workflow_name, status, worker_id, claim_token, started_at, heartbeat_at, retry_count, max_retries)
       VALUES ('ghost', 'running', 'dead-worker', gen_random_uuid(), now(), now() - $1 * interval '1 millisecond', $2, $3)
       RETURNING id`,
      [options.ageMs ?? 60_000, options.retryCount ?? 0, options.maxRetries ?? 3],
    );
    return rows[0].id;
  }

  /** A Nest app with ScheduleModule.forRoot() imported once, as the host does; no worker. */
  function startReaperApp(reaper: DuraflowModuleOptions['reaper'], extra: DuraflowModuleOptions = {}): Promise<TestingModule> {
    return bed.start({
      imports: [ScheduleModule.forRoot()],
      duraflow: { worker: { enabled: false }, reaper, ...extra },
    });
  }

  describe('reapOnce', () => {
    it('re-queues a stale running task with one more retry counted, and leaves fresh ones alone', async () => {
      const app = await startReaperApp({ ...reaperOptions(), enabled: false });
      const stale = await insertStaleTask();
      const fresh = await insertStaleTask({ ageMs: 0 });

      const result = await app.get(ReaperService).reapOnce();

      expect(result).toEqual({ requeued: [stale], rollingBack: [], failed: [], ended: [] });
      expect(await bed.rows.task(stale)).toMatchObject({
        status: 'pending',
        retry_count: 1,
        worker_id: null,
        claim_token: null,
        heartbeat_at: null,
      });
      expect(await bed.rows.task(fresh)).toMatchObject({ status: 'running', retry_count: 0, worker_id: 'dead-worker' });
      expect(await app.get(ReaperService).reapOnce()).toEqual({ requeued: [], rollingBack: [], failed: [], ended: [] });
    });

    it('fails a stale task whose retries are used up, with MAX_RETRIES_EXCEEDED', async () => {
      const app = await startReaperApp({ ...reaperOptions(), enabled: false });
      const id = await insertStaleTask({ retryCount: 2, maxRetries: 2 });

      const result = await app.get(ReaperService).reapOnce();

      expect(result).toEqual({ requeued: [], rollingBack: [], failed: [id], ended: [{ id, status: TaskStatus.FAILED }] });
      const row = await bed.rows.task(id);
      expect(row).toMatchObject({ status: 'failed', retry_count: 2, worker_id: null });
      expect(row.completed_at).toBeInstanceOf(Date);
      expect(row.error).toMatchObject({ code: 'MAX_RETRIES_EXCEEDED', name: 'MaxRetriesExceededError' });
      expect(row.error.message).toContain('max_retries is 2');
    });

    it('never double-counts when several reapers run at once', async () => {
      const a = await startReaperApp({ ...reaperOptions(), enabled: false });
      const b = await startReaperApp({ ...reaperOptions(), enabled: false });
      const ids: string[] = [];
      for (let i = 0; i < 60; i++) ids.push(await insertStaleTask());

      const results = await Promise.all([a, b, a, b].map((app) => app.get(ReaperService).reapOnce()));

      const requeued = results.flatMap((result) => result.requeued);
      expect(requeued.sort()).toEqual([...ids].sort());
      const { rows } = await bed.db.client.query(`SELECT DISTINCT status, retry_count FROM agent_tasks`);
      expect(rows).toEqual([{ status: 'pending', retry_count: 1 }]);
    });
  });

  describe('scheduling and leadership (PostgreSQL advisory lock, no redis option)', () => {
    it('reaps on its interval on the leader only, registered in the SchedulerRegistry', async () => {
      // Spied on the prototype before either app starts: every reaping pass, from the first tick, is seen.
      const reaps = jest.spyOn(TaskTransitions.prototype, 'reap');
      try {
        const reaper = reaperOptions(); // one leader key for both
        const a = await startReaperApp(reaper);
        const b = await startReaperApp(reaper);
        await eventually('one app leads', () => a.get(ReaperService).isLeader() || b.get(ReaperService).isLeader());
        const [leader, follower] = a.get(ReaperService).isLeader() ? [a, b] : [b, a];
        expect(follower.get(ReaperService).isLeader()).toBe(false);
        expect(leader.get(ReaperService).electionKind).toBe('postgres');
        expect(leader.get(SchedulerRegistry).getIntervals()).toContain(REAPER_INTERVAL_NAME);

        const id = await insertStaleTask();
        await eventually('the scheduled reaper re-queued the task', async () => (await bed.rows.task(id)).status === 'pending');
        expect(await bed.rows.task(id)).toMatchObject({ retry_count: 1 });
        await sleep(300); // a few more of the follower's ticks
        expect(follower.get(ReaperService).isLeader()).toBe(false);
        // Every pass ran on the leader's store; the follower never reaped.
        expect(reaps.mock.contexts.length).toBeGreaterThan(0);
        expect(reaps.mock.contexts.filter((store) => store !== leader.get(TaskTransitions))).toEqual([]);
      } finally {
        reaps.mockRestore();
      }
    });

    it('hands leadership over when the leader shuts down', async () => {
      const reaper = reaperOptions(); // one leader key for both
      const a = await startReaperApp(reaper);
      const b = await startReaperApp(reaper);
      await eventually('one app leads', () => a.get(ReaperService).isLeader() || b.get(ReaperService).isLeader());
      const [leader, follower] = a.get(ReaperService).isLeader() ? [a, b] : [b, a];

      await bed.close(leader);
      await eventually('the follower took over', () => follower.get(ReaperService).isLeader());
      const id = await insertStaleTask();
      await eventually('the new leader reaped', async () => (await bed.rows.task(id)).status === 'pending');
    });

    it('runs on a timer of its own when the host did not import ScheduleModule', async () => {
      const app = await bed.start({ duraflow: { worker: { enabled: false }, reaper: reaperOptions() } });
      const id = await insertStaleTask();
      await eventually('the reaper re-queued the task', async () => (await bed.rows.task(id)).status === 'pending');
      expect(app.get(ReaperService).isLeader()).toBe(true);
    });

    it('does nothing with reaper.enabled false', async () => {
      const app = await startReaperApp({ ...reaperOptions(), enabled: false });
      const id = await insertStaleTask();
      await sleep(400);
      expect(app.get(ReaperService).isLeader()).toBe(false);
      expect(await bed.rows.task(id)).toMatchObject({ status: 'running', retry_count: 0 });
    });
  });

  describe('leadership through Redis', () => {
    let redis: Redis;
    beforeAll(() => {
      redis = new Redis(SHARED_REDIS_URL, { lazyConnect: true });
      return redis.connect();
    });
    afterAll(() => redis.quit());

    it('elects exactly one leader, whose worker id is the key value, and releases the key on shutdown', async () => {
      const reaper = reaperOptions();
      const a = await startReaperApp(reaper, { redis: { url: SHARED_REDIS_URL }, workerId: `a-${randomUUID()}` });
      const b = await startReaperApp(reaper, { redis: { url: SHARED_REDIS_URL }, workerId: `b-${randomUUID()}` });
      await eventually('one app leads', () => a.get(ReaperService).isLeader() || b.get(ReaperService).isLeader());
      const [leader, follower] = a.get(ReaperService).isLeader() ? [a, b] : [b, a];
      expect(follower.get(ReaperService).isLeader()).toBe(false);
      expect(leader.get(ReaperService).electionKind).toBe('redis');
      expect(await redis.get(reaper!.leaderKey!)).toBe(leader.get(ReaperService)['options'].workerId);
      const ttl = await redis.pttl(reaper!.leaderKey!);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(1_000);

      const id = await insertStaleTask();
      await eventually('the leader reaped', async () => (await bed.rows.task(id)).status === 'pending');

      await bed.close(leader);
      await eventually('the follower took over', () => follower.get(ReaperService).isLeader());
      expect(await redis.get(reaper!.leaderKey!)).toBe(follower.get(ReaperService)['options'].workerId);
      await bed.close(follower);
      expect(await redis.exists(reaper!.leaderKey!)).toBe(0);
    });
  });

  describe('heartbeats keep running tasks from being reaped', () => {
    it('beats for every running task in one statement per tick, and the reaper leaves them alone', async () => {
      const barrier = new StepBarrier();
      const slow = workflow('slow', async (ctx: WorkflowContext) => {
        await ctx.step.run('wait', () => barrier.pass());
        return ctx.runId;
      });
      const app = await bed.start({
        imports: [ScheduleModule.forRoot()],
        duraflow: { workflows: [slow], heartbeatIntervalMs: 50, reaper: reaperOptions({ staleAfterMs: 500 }) },
      });
      const beats = jest.spyOn(app.get(TaskTransitions), 'renew');
      const workflows = app.get(WorkflowService);
      const ids = await Promise.all(Array.from({ length: 5 }, () => workflows.submit('slow', {}).then((task) => task.id)));
      await eventually('five tasks run', () => barrier.waiting === 5);

      beats.mockClear();
      await sleep(1_200); // more than twice staleAfterMs
      expect(beats.mock.calls.length).toBeGreaterThan(1);
      for (const [taskIds] of beats.mock.calls) expect([...taskIds].sort()).toEqual([...ids].sort());
      const { rows } = await bed.db.client.query(`SELECT status, retry_count FROM agent_tasks`);
      expect(rows).toEqual(Array(5).fill({ status: 'running', retry_count: 0 }));

      barrier.open();
      for (const id of ids) expect((await workflows.waitFor(id)).status).toBe(TaskStatus.COMPLETED);
    });
  });
});
