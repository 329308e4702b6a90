import { Test, TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DURAFLOW_ENTITIES, DuraflowModule, isTransientDatabaseError, runDuraflowMigrations } from '@duraflow/nestjs';
import { DuraflowDatabase } from '../libs/duraflow/src/persistence/duraflow-database';
import { FailoverPair } from './support/failover-pair';
import { eventually, sleep } from './support/waiting';
import { stopAllWorkerProcesses, withWorkerOutputOnFailure, WorkerProcess } from './support/worker-process';
import {
  countOutcome,
  DATABASE,
  finishedTasks,
  firstStepAfter,
  prepareDatabase,
  signalWaiting,
  startWorker,
  statusSummary,
  workersRecovered,
} from './fixtures/failover/failover-run';
import { FailoverKind } from './fixtures/failover/workflows';

/*
 * Semantics 21: a PostgreSQL failover loses nothing acknowledged. The test runs its own primary
 * and synchronous hot standby (test/support/failover-pair.ts) behind an address that moves, and
 * two worker processes on that address. A failover is a host failure: the primary's processes
 * SIGKILLed, the standby promoted, the address moved. Then the awkward moments: the address
 * reaching the standby before it is promoted (writes fail with 25006), a primary stopped (57P01)
 * and a standby refusing sessions (57P03), and a pool's session to a read-only server.
 */

const LOAD: Record<FailoverKind, number> = { steps: 600, saga: 150, sleep: 125, signal: 125 };
const TOTAL = Object.values(LOAD).reduce((sum, n) => sum + n, 0);
const SMALL: Record<FailoverKind, number> = { steps: 30, saga: 10, sleep: 10, signal: 10 };
const SMALL_TOTAL = Object.values(SMALL).reduce((sum, n) => sum + n, 0);

/** What the library logs when a worker gives a run up to recovery (task-executor.ts, run-outcomes.ts, worker-loop.ts). */
const GIVEN_UP = /it will be recovered|could not run/;

jest.setTimeout(240_000);

describe('failover: a synchronous standby promoted under load', () => {
  let pair: FailoverPair | undefined;

  afterEach(async () => {
    await stopAllWorkerProcesses();
    await pair?.close();
    pair = undefined;
  });

  async function runningPair(tasks: Record<FailoverKind, number>, options: { hotStandby?: boolean } = {}) {
    pair = await FailoverPair.start({ synchronous: true, ...options });
    await prepareDatabase(pair, tasks);
    const workers = [startWorker(pair, 'A'), startWorker(pair, 'B')];
    await Promise.all(workers.map((worker) => worker.ready));
    const pids = workers.map((worker) => worker.pid);
    return { pair, workers, pids };
  }

  async function finishAndCheck(current: FailoverPair, workers: WorkerProcess[], pids: Array<number | undefined>, total: number) {
    await signalWaiting(current, workers[0]);
    await eventually('every task finished', async () => (await finishedTasks(current)) === total, {
      timeoutMs: 180_000,
      everyMs: 250,
    }).catch(async (error: Error) => {
      throw new Error(`${error.message}; tasks by kind and status: ${JSON.stringify(await statusSummary(current))}`);
    });
    const outcome = await countOutcome(current);
    expect(outcome).toMatchObject({
      tasks: total,
      wrongStatus: 0,
      missingSteps: 0,
      returnedMissing: 0,
      rerunAfterCheckpoint: 0,
      missingCompensations: 0,
      deadLetters: 0,
    });
    // The workers held on to their runs through the failover: none was given up to recovery, as
    // the library says when it does. (The reaper may still re-queue a task whose claim committed
    // as the primary died, its reply lost: its worker never knew it had it. `recovered` counts those.)
    const givenUp = workers.flatMap((worker) => worker.outputTail(400).split('\n')).filter((line) => GIVEN_UP.test(line));
    expect(givenUp).toEqual([]);
    await workersRecovered(current, workers);
    // No process restarted: the same two processes ran from start to end.
    expect(workers.map((worker) => [worker.alive, worker.pid])).toEqual(pids.map((pid) => [true, pid]));
    return outcome;
  }

  it(
    'loses no task and re-runs no checkpointed step when the primary is SIGKILLed mid-run, the standby promoted and the address moved',
    withWorkerOutputOnFailure(async () => {
      const { pair: current, workers, pids } = await runningPair(LOAD);
      await eventually('a quarter of the tasks finished', async () => (await finishedTasks(current)) >= TOTAL / 4, {
        timeoutMs: 120_000,
        everyMs: 100,
      });
      await signalWaiting(current, workers[0]);
      const finishedBefore = await finishedTasks(current);
      const times = await current.failover();
      // The new primary takes no write before its promotion: the first step started after it ends the window.
      const resumedAt = await eventually('a step starts on the new primary', () => firstStepAfter(current, times.promotedAt), {
        timeoutMs: 60_000,
        everyMs: 50,
      });
      const outcome = await finishAndCheck(current, workers, pids, TOTAL);
      console.log(
        `failover under load: ${TOTAL} tasks (${JSON.stringify(LOAD)}), 2 workers, synchronous standby; ` +
          `${finishedBefore} finished before the SIGKILL; promoted ${times.promotedAt - times.killedAt} ms after it, ` +
          `address moved at ${times.movedAt - times.killedAt} ms; unavailability window (SIGKILL, the first statement to fail -> first step started on the new primary) ` +
          `${resumedAt! - times.killedAt} ms; ${outcome.steps} step checkpoints, ${outcome.repeatedBeforeCheckpoint} steps run twice before their checkpoint returned ` +
          `(${outcome.rerunAfterLostReply} of them after a checkpoint commit whose reply the SIGKILL cut); ` +
          `${outcome.recovered} tasks re-queued by the reaper`,
      );
    }),
  );

  it(
    'treats 25006 from a standby the address reaches before its promotion as an outage: no task fails, no dead letter',
    withWorkerOutputOnFailure(async () => {
      const { pair: current, workers, pids } = await runningPair(SMALL);
      await eventually('some tasks finished', async () => (await finishedTasks(current)) >= 5, { timeoutMs: 60_000, everyMs: 50 });
      await current.killPrimary();
      await current.moveAddressTo('standby');
      // Reads work there, every write fails with 25006: long enough for claims, checkpoints and the lease to meet it.
      // The workers' sessions through the address come and go (a pool drops a session a statement broke), so the
      // most seen at once over the window is what shows they reached the standby.
      let most = 0;
      for (const until = Date.now() + 3_000; Date.now() < until; await sleep(50)) most = Math.max(most, current.sessionsTo('standby'));
      expect(most).toBeGreaterThan(0);
      await current.promoteStandby();
      await finishAndCheck(current, workers, pids, SMALL_TOTAL);
    }),
  );

  it(
    'treats 57P01 from a primary shut down and 57P03 from a standby refusing sessions as an outage',
    withWorkerOutputOnFailure(async () => {
      const { pair: current, workers, pids } = await runningPair(SMALL, { hotStandby: false });
      await eventually('some tasks finished', async () => (await finishedTasks(current)) >= 5, { timeoutMs: 60_000, everyMs: 50 });
      // A planned switchover: sessions end with 57P01; the standby (no hot_standby) refuses new ones with 57P03.
      await current.stopPrimary();
      await current.moveAddressTo('standby');
      await sleep(3_000);
      await current.promoteStandby();
      await finishAndCheck(current, workers, pids, SMALL_TOTAL);
    }),
  );
});

describe('failover: the pool and a session to a read-only server', () => {
  let pair: FailoverPair | undefined;
  let app: TestingModule | undefined;

  afterEach(async () => {
    await app?.close();
    await pair?.close();
  });

  it('destroys a session whose transaction met 25006, so the next one reaches the primary the address moved to', async () => {
    pair = await FailoverPair.start({ synchronous: true });
    await pair.query('postgres', `CREATE DATABASE ${DATABASE}`);
    await runDuraflowMigrations(pair.primaryUrl(DATABASE));
    await pair.query(DATABASE, `CREATE TABLE written (n int)`);
    await pair.waitForStandbyReplay();
    await pair.moveAddressTo('standby');
    app = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: pair.urlOf(DATABASE), entities: [...DURAFLOW_ENTITIES], extra: { max: 1 } }),
        DuraflowModule.forRoot({ worker: { enabled: false }, reaper: { enabled: false } }),
      ],
    }).compile();
    await app.init();
    const db = app.get(DuraflowDatabase);
    const write = () => db.transaction((executor) => executor.query(`INSERT INTO written VALUES (1)`));

    const error = await write().then(
      () => undefined,
      (failure: unknown) => failure,
    );
    expect(error).toMatchObject({ code: '25006' });
    expect(isTransientDatabaseError(error)).toBe(true);
    // As a DNS change does: sessions already open stay where they were.
    await pair.moveAddressTo('primary', { keepSessions: true });
    await write();
    expect(pair.sessionsTo('standby')).toBe(0);
    expect(await pair.query(DATABASE, `SELECT n FROM written`)).toEqual([{ n: 1 }]);
  });
});
