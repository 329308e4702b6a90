import Redis from 'ioredis';
import { useChaosBed } from './fixtures/chaos/chaos-bed';
import { eventually, sleep } from './support/waiting';
import { SHARED_REDIS_URL } from './support/redis-server';
import { withWorkerOutputOnFailure, WorkerProcess } from './support/worker-process';

describe('chaos: two reaper processes and the Redis leader key', () => {
  const bed = useChaosBed(['chaos-steps']);
  let redis: Redis;

  beforeEach(() => {
    redis = new Redis(SHARED_REDIS_URL);
  });
  afterEach(async () => {
    await redis.quit();
  });

  const isLeader = (worker: WorkerProcess) => worker.call<boolean>('ReaperService', 'isLeader');

  it(
    'has exactly one leader; when it is SIGKILLed the other takes over once its key expires, and reaps',
    withWorkerOutputOnFailure(async () => {
      const key = bed.workerOptions().reaper!.leaderKey!;
      const ttlMs = 1_500;
      const options = { duraflow: { worker: { enabled: false }, reaper: { leaderTtlMs: ttlMs, intervalMs: 100 } } };
      const a = bed.startWorker({ ...options, label: 'A' });
      const b = bed.startWorker({ ...options, label: 'B' });
      await Promise.all([a.ready, b.ready]);

      await eventually('exactly one process leads', async () => (await isLeader(a)) !== (await isLeader(b)), { timeoutMs: 10_000 });
      const [leader, follower] = (await isLeader(a)) ? [a, b] : [b, a];
      expect(await redis.get(key)).toBe(leader.workerId);
      const ttl = await redis.pttl(key);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(ttlMs);
      // The leader renews: the key outlives several ttl's while it lives, and nobody else gets it.
      for (let i = 0; i < 3; i++) {
        await sleep(ttlMs / 2);
        expect(await redis.get(key)).toBe(leader.workerId);
        expect(await isLeader(follower)).toBe(false);
      }

      leader.kill('SIGKILL');
      expect(await leader.exited).toEqual({ code: null, signal: 'SIGKILL' });
      // Nobody deleted the dead leader's key: the follower gets it when it expires.
      await eventually('the follower took over', async () => await isLeader(follower), { timeoutMs: 15_000 });
      expect(await redis.get(key)).toBe(follower.workerId);

      // The new leader reaps: a task left running by a dead worker goes back to pending.
      const { rows } = await bed.db.client.query<{ id: string }>(
        `INSERT INTO agent_tasks (workflow_name, status, worker_id, claim_token, heartbeat_at, input)
         VALUES ('chaos-steps', 'running', $1, gen_random_uuid(), now() - interval '1 hour', '{"steps":1,"stepMs":0}')
         RETURNING id`,
        [leader.workerId],
      );
      await eventually(
        'the new leader re-queued the dead worker\u2019s task',
        async () => (await bed.task(rows[0].id)).status === 'pending',
        { timeoutMs: 10_000 },
      );
      expect((await bed.task(rows[0].id)).retryCount).toBe(1);
    }),
    45_000,
  );
});
