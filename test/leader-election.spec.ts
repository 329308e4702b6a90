import { ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import Redis from 'ioredis';
import { Client } from 'pg';
import {
  createLeaderElection,
  LeaderElection,
  LeaderElectionLogger,
  PostgresLeaderElection,
  RedisLeaderElection,
  RedisLeaderElectionOptions,
} from '@duraflow/nestjs/leader';
import { SWC_REGISTER } from './support/typescript-node';
import { terminateBackends } from './support/database';
import { useTestBed } from './support/test-bed';
import { RedisServer, SHARED_REDIS_URL } from './support/redis-server';
import { eventually, sleep } from './support/waiting';

/** Keeps what an election logs, so a test can count its outage messages. */
class RecordingLogger implements LeaderElectionLogger {
  readonly logs: string[] = [];
  readonly warnings: string[] = [];

  log(message: unknown): void {
    this.logs.push(String(message));
  }

  warn(message: unknown): void {
    this.warnings.push(String(message));
  }
}

function uniqueKey(): string {
  return `duraflow:test:${randomUUID()}`;
}

/** The two of a pair after one tick each: exactly one must lead. */
function leaderAndFollower<T extends LeaderElection>(nodes: [T, T], results: boolean[]): [T, T] {
  expect(results.filter(Boolean)).toHaveLength(1);
  return results[0] ? nodes : [nodes[1], nodes[0]];
}

/**
 * A host application in a process of its own, running one Redis election: it answers `tick`
 * with `tick true|false`, and `close` with `closed`, after which it must exit by itself.
 */
class HostProcess {
  private readonly replies: string[] = [];
  private readonly waiting: Array<(line: string) => void> = [];
  private stderr = '';

  private constructor(private readonly child: ChildProcess) {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const next = this.waiting.shift();
      if (next) next(line);
      else this.replies.push(line);
    });
    child.stderr!.on('data', (chunk: Buffer) => (this.stderr += chunk.toString()));
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal, stderr: this.stderr })));
  }

  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>;

  static start(options: { url: string; key: string }): HostProcess {
    const script = `
      const { RedisLeaderElection } = require('@duraflow/nestjs/leader');
      const election = new RedisLeaderElection({
        redis: { url: ${JSON.stringify(options.url)} },
        key: ${JSON.stringify(options.key)},
        workerId: 'host-process',
        ttlMs: 5000,
        logger: { log() {}, warn() {} },
      });
      const commands = require('node:readline').createInterface({ input: process.stdin });
      commands.on('line', async (command) => {
        if (command === 'tick') console.log('tick ' + (await election.tick()));
        if (command === 'close') {
          await election.close();
          commands.close();
          console.log('closed');
        }
      });`;
    const child = spawn(process.execPath, ['--require', SWC_REGISTER, '-e', script], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    return new HostProcess(child);
  }

  /** Sends one command and resolves to the host's reply (or fails when it died first). */
  send(command: string): Promise<string> {
    const reply = this.replies.shift();
    const answer = reply !== undefined ? Promise.resolve(reply) : new Promise<string>((resolve) => this.waiting.push(resolve));
    this.child.stdin!.write(`${command}\n`);
    return Promise.race([
      answer,
      this.exited.then((exit) => {
        throw new Error(`the host process exited (${exit.code ?? exit.signal}): ${exit.stderr}`);
      }),
    ]);
  }

  /** Resolves when the host exits by itself; fails if it is still running after `timeoutMs`. */
  async exit(timeoutMs: number): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the host process did not exit within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      return await Promise.race([this.exited, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }
}

describe('Reaper leader election', () => {
  const opened: LeaderElection[] = [];

  afterEach(async () => {
    await Promise.all(opened.splice(0).map((election) => election.close()));
  });

  describe('on Redis', () => {
    let redis: Redis;

    beforeAll(() => {
      redis = new Redis(SHARED_REDIS_URL);
    });
    afterAll(() => redis.quit());

    function redisNode(options: Partial<RedisLeaderElectionOptions> & { key: string }): RedisLeaderElection {
      const node = new RedisLeaderElection({
        redis: { url: SHARED_REDIS_URL },
        workerId: `worker-${randomUUID()}`,
        ttlMs: 60_000,
        logger: new RecordingLogger(),
        ...options,
      });
      opened.push(node);
      return node;
    }

    it('elects exactly one of two nodes, which stores its worker id under the key with the ttl', async () => {
      const key = uniqueKey();
      const nodes: [RedisLeaderElection, RedisLeaderElection] = [redisNode({ key, ttlMs: 5_000 }), redisNode({ key, ttlMs: 5_000 })];

      const [leader, follower] = leaderAndFollower(nodes, await Promise.all(nodes.map((node) => node.tick())));

      expect(leader.isLeader()).toBe(true);
      expect(follower.isLeader()).toBe(false);
      expect(await redis.get(key)).toBe(leader.workerId);
      const pttl = await redis.pttl(key);
      expect(pttl).toBeGreaterThan(0);
      expect(pttl).toBeLessThanOrEqual(5_000);
    });

    it('renews the ttl of the key it holds', async () => {
      const key = uniqueKey();
      const leader = redisNode({ key, ttlMs: 60_000 });
      expect(await leader.tick()).toBe(true);

      // As if most of the ttl had passed.
      await redis.pexpire(key, 1_000);
      expect(await leader.tick()).toBe(true);

      expect(await redis.get(key)).toBe(leader.workerId);
      expect(await redis.pttl(key)).toBeGreaterThan(30_000);
    });

    it('keeps the leader over several ttls while it renews, and the follower stays a follower', async () => {
      const key = uniqueKey();
      // A ttl the renewals stay well inside even on a loaded machine (a 400 ms one once
      // expired under a pause of the whole test run), renewed about every 0.3 ttl.
      const leader = redisNode({ key, ttlMs: 1_000 });
      const follower = redisNode({ key, ttlMs: 1_000 });
      expect(await leader.tick()).toBe(true);

      // The follower tries far more often than the leader renews: a key left to expire would be its.
      for (let round = 0; round < 12; round++) {
        for (let attempt = 0; attempt < 5; attempt++) {
          expect(await follower.tick()).toBe(false);
          await sleep(60);
        }
        expect(await leader.tick()).toBe(true);
      }

      expect(follower.isLeader()).toBe(false);
      expect(await redis.get(key)).toBe(leader.workerId);
    });

    it('steps down when renewal finds another holder, and leaves that holder alone', async () => {
      const key = uniqueKey();
      const node = redisNode({ key });
      expect(await node.tick()).toBe(true);

      await redis.set(key, 'another-worker', 'PX', 60_000);

      expect(await node.tick()).toBe(false);
      expect(node.isLeader()).toBe(false);
      expect(await redis.get(key)).toBe('another-worker');
    });

    it('deletes the key on close while it holds it, and the follower takes over on its next tick', async () => {
      const key = uniqueKey();
      const nodes: [RedisLeaderElection, RedisLeaderElection] = [redisNode({ key }), redisNode({ key })];
      const [leader, follower] = leaderAndFollower(nodes, await Promise.all(nodes.map((node) => node.tick())));

      await leader.close();

      expect(await redis.exists(key)).toBe(0);
      expect(leader.isLeader()).toBe(false);
      expect(await leader.tick()).toBe(false);
      await expect(leader.close()).resolves.toBeUndefined();
      expect(await follower.tick()).toBe(true);
      expect(await redis.get(key)).toBe(follower.workerId);
    });

    it('does not delete on close a key that another node holds by then', async () => {
      const key = uniqueKey();
      const node = redisNode({ key });
      expect(await node.tick()).toBe(true);

      await redis.set(key, 'another-worker', 'PX', 60_000);
      await node.close();

      expect(await redis.get(key)).toBe('another-worker');
    });

    it('replaces a leader that stopped ticking once its key expires, and that leader stops believing it leads', async () => {
      const key = uniqueKey();
      const stalled = redisNode({ key, ttlMs: 1_000 });
      const follower = redisNode({ key, ttlMs: 1_000 });
      expect(await stalled.tick()).toBe(true);

      // From here on `stalled` never ticks again, as if it had been SIGKILLed.
      const followerTicks: boolean[] = [];
      await eventually(
        'the follower takes over',
        async () => {
          const leads = await follower.tick();
          followerTicks.push(leads);
          // Never two leaders: by the time the key can be taken, the old leader has stepped down.
          if (leads) expect(stalled.isLeader()).toBe(false);
          return leads;
        },
        { timeoutMs: 10_000 },
      );

      expect(followerTicks[0]).toBe(false);
      expect(await redis.get(key)).toBe(follower.workerId);
      expect(stalled.isLeader()).toBe(false);
    });

    describe('when Redis goes away', () => {
      let server: RedisServer;
      let serverClient: Redis;

      beforeEach(async () => {
        server = await RedisServer.start();
        serverClient = new Redis(server.url, { lazyConnect: true, enableOfflineQueue: false, retryStrategy: () => null });
        serverClient.on('error', () => undefined);
      });

      afterEach(async () => {
        serverClient.disconnect();
        await server.teardown();
      });

      it('stops leading at the first failed tick, logs the outage once, and leads again when Redis is back', async () => {
        const key = uniqueKey();
        const logger = new RecordingLogger();
        const node = redisNode({ key, redis: { url: server.url }, ttlMs: 5_000, logger });
        expect(await node.tick()).toBe(true);

        await server.stop();
        for (let attempt = 0; attempt < 5; attempt++) {
          expect(await node.tick()).toBe(false);
          expect(node.isLeader()).toBe(false);
          await sleep(50);
        }
        expect(logger.warnings.filter((message) => message.includes('Redis is unreachable'))).toHaveLength(1);

        await server.restart();
        await eventually('the node leads again', () => node.tick(), { timeoutMs: 10_000 });
        await node.tick();

        expect(logger.logs.filter((message) => message.includes('Redis is reachable again'))).toHaveLength(1);
        expect(logger.warnings.filter((message) => message.includes('Redis is unreachable'))).toHaveLength(1);
        await serverClient.connect();
        expect(await serverClient.get(key)).toBe(node.workerId);
      });

      it('follows while Redis is down at boot, leads once it is up, and closes cleanly during an outage', async () => {
        const key = uniqueKey();
        await server.stop();
        const node = redisNode({ key, redis: { url: server.url } });

        expect(await node.tick()).toBe(false);
        expect(await node.tick()).toBe(false);

        await server.restart();
        await eventually('the node leads once Redis is up', () => node.tick(), { timeoutMs: 10_000 });

        await server.stop();
        await expect(node.close()).resolves.toBeUndefined();
        await expect(node.close()).resolves.toBeUndefined();
        expect(await node.tick()).toBe(false);
      });

      // In its own process, because Jest hides what Node does with an 'error' event nobody
      // listens to (ioredis's Error check fails across Jest's realms).
      it('does not crash its host process or leave it an unhandled error event, and lets it exit after close', async () => {
        const host = HostProcess.start({ url: server.url, key: uniqueKey() });
        try {
          expect(await host.send('tick')).toBe('tick true');

          await server.stop();
          // Long enough for several reconnection attempts to be refused.
          for (let attempt = 0; attempt < 4; attempt++) {
            expect(await host.send('tick')).toBe('tick false');
            await sleep(150);
          }
          await server.restart();
          await eventually('the host leads again', async () => (await host.send('tick')) === 'tick true', { timeoutMs: 10_000 });
          // Closed in the middle of an outage, it must stop reconnecting, or the host could never exit.
          await server.stop();
          expect(await host.send('tick')).toBe('tick false');
          expect(await host.send('close')).toBe('closed');

          const exit = await host.exit(10_000);
          expect(exit.stderr).not.toContain('Unhandled error');
          expect(exit).toEqual({ code: 0, signal: null, stderr: '' });
        } finally {
          host.kill();
        }
      });
    });
  });

  describe('on PostgreSQL (no Redis): a lease row with a term', () => {
    const bed = useTestBed();
    const TTL_MS = 1_000;

    function postgresNode(
      key: string,
      logger = new RecordingLogger(),
      createClient = () => new Client({ connectionString: bed.db.url }),
    ): PostgresLeaderElection {
      const node = new PostgresLeaderElection({ key, createClient, workerId: `node-${randomUUID()}`, ttlMs: TTL_MS, logger });
      opened.push(node);
      return node;
    }

    /** The key's lease row: who holds it, under which term, and whether it is still running. */
    async function lease(key: string): Promise<{ holder: string; term: string; live: boolean } | undefined> {
      const { rows } = await bed.db.client.query<{ holder: string; term: string; live: boolean }>(
        `SELECT holder, term::text AS term, expires_at > clock_timestamp() AS live FROM duraflow_leader WHERE name = $1`,
        [key],
      );
      return rows[0];
    }

    it('elects exactly one of two nodes: the one whose name the lease row holds, under term 1', async () => {
      const key = uniqueKey();
      const nodes: [PostgresLeaderElection, PostgresLeaderElection] = [postgresNode(key), postgresNode(key)];

      const [leader, follower] = leaderAndFollower(nodes, await Promise.all(nodes.map((node) => node.tick())));

      expect(leader.isLeader()).toBe(true);
      expect(follower.isLeader()).toBe(false);
      expect(leader.term).toBe('1');
      expect(await lease(key)).toEqual({ holder: leader.workerId, term: '1', live: true });
      for (let round = 0; round < 3; round++) {
        await sleep(TTL_MS / 2);
        expect(await leader.tick()).toBe(true);
        expect(await follower.tick()).toBe(false);
      }
      // Renewed past several halves of its ttl, by compare-and-set: same holder, same term.
      expect(await lease(key)).toEqual({ holder: leader.workerId, term: '1', live: true });
    });

    it('hands leadership over on close: the lease expires at once and the other node takes it with the next term', async () => {
      const key = uniqueKey();
      const nodes: [PostgresLeaderElection, PostgresLeaderElection] = [postgresNode(key), postgresNode(key)];
      const [leader, follower] = leaderAndFollower(nodes, await Promise.all(nodes.map((node) => node.tick())));

      await leader.close();

      expect(leader.isLeader()).toBe(false);
      expect(await lease(key)).toEqual({ holder: leader.workerId, term: '1', live: false });
      expect(await follower.tick()).toBe(true);
      expect(await lease(key)).toEqual({ holder: follower.workerId, term: '2', live: true });
      await expect(leader.close()).resolves.toBeUndefined();
    });

    it('replaces a leader that stopped ticking once its lease expires, and that leader then finds it lost (a new term)', async () => {
      const key = uniqueKey();
      const stalled = postgresNode(key);
      const other = postgresNode(key);
      expect(await stalled.tick()).toBe(true);
      expect(await other.tick()).toBe(false);

      // The stalled node does not tick (a frozen process); its lease is not renewed.
      await eventually('the other node takes the expired lease', () => other.tick(), { timeoutMs: 10_000 });
      expect(stalled.isLeader()).toBe(false);
      expect(await lease(key)).toEqual({ holder: other.workerId, term: '2', live: true });
      expect(await stalled.tick()).toBe(false);
      expect(await stalled.fence()).toBeUndefined();
      expect(await other.fence()).toEqual({ kind: 'lease', name: key, holder: other.workerId, term: '2' });
    });

    it("lets another node take the lease at once, without waiting for its expiry, once the holder's session is gone", async () => {
      const key = uniqueKey();
      const longTtl = (workerId: string) =>
        new PostgresLeaderElection({
          key,
          workerId,
          ttlMs: 60_000,
          createClient: () => new Client({ connectionString: bed.db.url }),
          logger: new RecordingLogger(),
        });
      const dead = longTtl(`dead-${randomUUID()}`);
      const other = longTtl(`other-${randomUUID()}`);
      opened.push(dead, other);
      expect(await dead.tick()).toBe(true);
      expect(await other.tick()).toBe(false);

      // What a SIGKILLed process leaves: its row, live for another minute, and no session.
      await terminateBackends(bed.db.client, [dead.backendPid!], 5000);

      expect(await other.tick()).toBe(true);
      expect(await lease(key)).toEqual({ holder: other.workerId, term: '2', live: true });
      expect(await dead.tick()).toBe(false);
    });

    it('steps down when its connection is terminated, the other node takes over, and it can lead again later', async () => {
      const key = uniqueKey();
      const logger = new RecordingLogger();
      const terminated = postgresNode(key, logger);
      const other = postgresNode(key);
      expect(await terminated.tick()).toBe(true);
      expect(await other.tick()).toBe(false);
      const oldPid = terminated.backendPid!;

      expect(await terminateBackends(bed.db.client, [oldPid], 5000)).toEqual([oldPid]);

      expect(await terminated.tick()).toBe(false);
      expect(terminated.isLeader()).toBe(false);
      await eventually('the other node takes over', () => other.tick(), { timeoutMs: 10_000 });
      expect(await lease(key)).toEqual({ holder: other.workerId, term: '2', live: true });

      expect(await terminated.tick()).toBe(false);
      expect(terminated.backendPid).toEqual(expect.any(Number));
      expect(terminated.backendPid).not.toBe(oldPid);

      await other.close();
      expect(await terminated.tick()).toBe(true);
      expect(await lease(key)).toEqual({ holder: terminated.workerId, term: '3', live: true });
      expect(logger.warnings.filter((message) => message.includes('PostgreSQL session lost'))).toHaveLength(1);
      expect(logger.logs.filter((message) => message.includes('PostgreSQL is reachable again'))).toHaveLength(1);
    });

    it('follows while PostgreSQL cannot be reached, logs that once, and leads once it can', async () => {
      const key = uniqueKey();
      const logger = new RecordingLogger();
      let reachable = false;
      const unreachableUrl = new URL(bed.db.url);
      unreachableUrl.port = '1';
      const node = postgresNode(key, logger, () => new Client({ connectionString: reachable ? bed.db.url : unreachableUrl.toString() }));

      for (let attempt = 0; attempt < 3; attempt++) {
        expect(await node.tick()).toBe(false);
        expect(node.isLeader()).toBe(false);
      }
      expect(logger.warnings).toHaveLength(1);

      reachable = true;
      expect(await node.tick()).toBe(true);
      expect(await lease(key)).toEqual({ holder: node.workerId, term: '1', live: true });
      expect(logger.logs.filter((message) => message.includes('PostgreSQL is reachable again'))).toHaveLength(1);
    });
  });

  describe('createLeaderElection', () => {
    it('elects on Redis when a redis option is given, and on PostgreSQL otherwise', async () => {
      const common = {
        key: uniqueKey(),
        workerId: 'worker-1',
        ttlMs: 1_000,
        createClient: () => new Client(),
        logger: new RecordingLogger(),
      };
      const withRedis = createLeaderElection({ ...common, redis: { url: SHARED_REDIS_URL } });
      const withoutRedis = createLeaderElection(common);
      opened.push(withRedis, withoutRedis);

      expect(withRedis).toBeInstanceOf(RedisLeaderElection);
      expect(withRedis.kind).toBe('redis');
      expect(withoutRedis).toBeInstanceOf(PostgresLeaderElection);
      expect(withoutRedis.kind).toBe('postgres');
    });
  });
});
