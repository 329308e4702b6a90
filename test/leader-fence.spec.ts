import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { Client } from 'pg';
import { LeaderElection, PostgresLeaderElection, RedisLeaderElection } from '@duraflow/nestjs/leader';
import { clientExecutor, SqlExecutor } from '../libs/duraflow/src/persistence/duraflow-database';
import { reapStaleTasks } from '../libs/duraflow/src/persistence/lifecycle/reap-stale-tasks';
import { SHARED_REDIS_URL } from './support/redis-server';
import { useTestBed } from './support/test-bed';
import { eventually, sleep } from './support/waiting';

const quiet = { log: () => undefined, warn: () => undefined };
const STALE_AFTER_MS = 1_000;

describe('the reaper leader fence: a pass by a leader that lost its leadership reaps nothing', () => {
  const bed = useTestBed({ databasePerTest: true });
  const opened: LeaderElection[] = [];
  let db: SqlExecutor;

  beforeEach(() => {
    db = clientExecutor(bed.db.client);
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((election) => election.close()));
  });

  /** A task as a worker that died mid-run leaves it: running, its heartbeat a minute old. */
  async function insertStaleTask(): Promise<string> {
    const { rows } = await bed.db.client.query<{ id: string }>(
      `INSERT INTO agent_tasks (workflow_name, status, worker_id, claim_token, started_at, heartbeat_at, retry_count, max_retries)
       VALUES ('ghost', 'running', 'dead-worker', gen_random_uuid(), now(), now() - interval '1 minute', 0, 3)
       RETURNING id`,
    );
    return rows[0].id;
  }

  async function statusOf(id: string): Promise<{ status: string; retry_count: number }> {
    const { rows } = await bed.db.client.query(`SELECT status, retry_count FROM agent_tasks WHERE id = $1`, [id]);
    return rows[0];
  }

  describe('on PostgreSQL (the lease row)', () => {
    function node(key: string, ttlMs = 1_000): PostgresLeaderElection {
      const election = new PostgresLeaderElection({
        key,
        workerId: `node-${randomUUID()}`,
        ttlMs,
        createClient: () => new Client({ connectionString: bed.db.url }),
        logger: quiet,
      });
      opened.push(election);
      return election;
    }

    it('changes no row with the term a frozen leader held once another node took the lease; the new term reaps', async () => {
      const key = `duraflow:test:${randomUUID()}`;
      const frozen = node(key);
      const other = node(key);
      expect(await frozen.tick()).toBe(true);
      const staleFence = (await frozen.fence())!;
      expect(staleFence).toEqual({ kind: 'lease', name: key, holder: frozen.workerId, term: '1' });
      await eventually('the other node takes the expired lease', () => other.tick(), { timeoutMs: 10_000 });
      const id = await insertStaleTask();

      // The frozen leader wakes and runs the pass it had prepared, with the term it held.
      expect(await reapStaleTasks(db, STALE_AFTER_MS, staleFence)).toEqual([]);
      expect(await statusOf(id)).toEqual({ status: 'running', retry_count: 0 });

      const reaped = await reapStaleTasks(db, STALE_AFTER_MS, (await other.fence())!);
      expect(reaped.map((task) => [task.id, task.action])).toEqual([[id, 'requeue']]);
      expect(await statusOf(id)).toEqual({ status: 'pending', retry_count: 1 });
    });

    it('changes no row with a lease that expired, even when no other node took it', async () => {
      const key = `duraflow:test:${randomUUID()}`;
      const leader = node(key, 300);
      expect(await leader.tick()).toBe(true);
      const fence = (await leader.fence())!;
      const id = await insertStaleTask();
      await sleep(400);

      expect(await reapStaleTasks(db, STALE_AFTER_MS, fence)).toEqual([]);
      expect(await statusOf(id)).toEqual({ status: 'running', retry_count: 0 });
    });

    it('makes a takeover wait for a fenced pass in flight: the two terms never reap at once', async () => {
      const key = `duraflow:test:${randomUUID()}`;
      const leader = node(key, 300);
      const other = node(key, 300);
      expect(await leader.tick()).toBe(true);
      const fence = (await leader.fence())!;
      const id = await insertStaleTask();
      // A pass that holds its transaction open: its lease row stays locked FOR SHARE until it commits.
      const pass = new Client({ connectionString: bed.db.url });
      await pass.connect();
      try {
        await pass.query('BEGIN');
        expect((await reapStaleTasks(clientExecutor(pass), STALE_AFTER_MS, fence)).map((task) => task.id)).toEqual([id]);
        await sleep(400);
        let tookOver = false;
        const takeover = other.tick().then((leads) => ((tookOver = true), leads));
        await sleep(200);
        expect(tookOver).toBe(false);
        await pass.query('COMMIT');
        expect(await takeover).toBe(true);
        expect(other.term).toBe('2');
      } finally {
        await pass.end();
      }
      expect(await statusOf(id)).toEqual({ status: 'pending', retry_count: 1 });
    });
  });

  describe('on Redis (a deadline in the database clock)', () => {
    let redis: Redis;
    beforeEach(() => {
      redis = new Redis(SHARED_REDIS_URL);
    });
    afterEach(() => redis.quit());

    function node(key: string, ttlMs: number): RedisLeaderElection {
      const election = new RedisLeaderElection({
        redis: { url: SHARED_REDIS_URL },
        key,
        workerId: `node-${randomUUID()}`,
        ttlMs,
        logger: quiet,
      });
      opened.push(election);
      return election;
    }

    it('gives a fence that reaps before the key can expire, and nothing when run after it', async () => {
      const key = `duraflow:test:${randomUUID()}`;
      const leader = node(key, 600);
      expect(await leader.tick()).toBe(true);
      const late = await leader.fence(db);
      expect(late).toMatchObject({ kind: 'deadline' });
      const first = await insertStaleTask();

      // Held past the key's life (the process froze between the check and the statement): nothing.
      await sleep(700);
      expect(await redis.get(key)).toBeNull();
      expect(await reapStaleTasks(db, STALE_AFTER_MS, late)).toEqual([]);
      expect(await statusOf(first)).toEqual({ status: 'running', retry_count: 0 });

      expect(await leader.tick()).toBe(true);
      const reaped = await reapStaleTasks(db, STALE_AFTER_MS, await leader.fence(db));
      expect(reaped.map((task) => task.id)).toEqual([first]);
    });

    it('gives no fence once the key holds another node', async () => {
      const key = `duraflow:test:${randomUUID()}`;
      const leader = node(key, 5_000);
      expect(await leader.tick()).toBe(true);
      await redis.set(key, 'someone-else', 'PX', 5_000);

      expect(await leader.fence(db)).toBeUndefined();
    });
  });
});
