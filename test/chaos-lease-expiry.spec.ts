import { readFileSync } from 'node:fs';
import { TaskStatus, WorkerStats } from '@duraflow/nestjs';
import { useChaosBed } from './fixtures/chaos/chaos-bed';
import { eventually, sleep } from './support/waiting';
import { withWorkerOutputOnFailure, WorkerProcess } from './support/worker-process';

/** The process's state letter in /proc (`T`: stopped by a signal). */
function processState(pid: number): string {
  return readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0];
}

describe('chaos: leases that expire on their own (issue 14)', () => {
  const bed = useChaosBed(['chaos-steps', 'chaos-block']);
  const isLeader = (worker: WorkerProcess) => worker.call<boolean>('ReaperService', 'isLeader');
  const stats = (worker: WorkerProcess) => worker.call<WorkerStats>('WorkerService', 'stats');

  async function leaseRow(): Promise<{ holder: string; term: string }> {
    const { rows } = await bed.db.client.query(`SELECT holder, term::text AS term FROM duraflow_leader WHERE name = $1`, [
      bed.workerOptions().reaper!.leaderKey,
    ]);
    return rows[0];
  }

  it(
    'replaces a PostgreSQL leader frozen (SIGSTOP) past its lease, and recovers the task it held while it is still frozen',
    withWorkerOutputOnFailure(async () => {
      // No Redis: the election is the lease row.
      const postgresMode = { redis: undefined, reaper: { leaderTtlMs: 1_000 } };
      const a = bed.startWorker({ label: 'A', duraflow: postgresMode });
      await a.ready;
      await eventually('A leads', () => isLeader(a), { timeoutMs: 10_000 });
      const submitted = await bed.workflows.submit('chaos-steps', { steps: 8, stepMs: 1_500 }, { maxRetries: 3 });
      await eventually('A runs the task', async () => (await bed.effects(submitted.id)).length >= 1, { timeoutMs: 10_000 });
      const b = bed.startWorker({ label: 'B', duraflow: postgresMode });
      await b.ready;
      expect(await isLeader(b)).toBe(false);
      const before = await leaseRow();
      expect(before.holder).toBe(a.workerId);
      expect((await bed.task(submitted.id)).status).toBe(TaskStatus.RUNNING);

      a.kill('SIGSTOP');
      await eventually('B took the lease over', () => isLeader(b), { timeoutMs: 15_000 });
      expect(await leaseRow()).toEqual({ holder: b.workerId, term: String(Number(before.term) + 1) });
      const finished = await bed.workflows.waitFor(submitted.id, { timeoutMs: 40_000 });
      expect(finished).toMatchObject({ status: TaskStatus.COMPLETED, workerId: b.workerId, retryCount: 1, output: { steps: 8 } });
      // Recovered while A was still frozen: its session stayed open all along, and it held no lock that mattered.
      expect(processState(a.pid)).toBe('T');

      a.kill('SIGCONT');
      await eventually('A knows it no longer leads', async () => !(await isLeader(a)), { timeoutMs: 10_000 });
      await eventually('A let go of the task', async () => (await stats(a)).running === 0, { timeoutMs: 10_000 });
      expect(await leaseRow()).toEqual({ holder: b.workerId, term: String(Number(before.term) + 1) });
      expect(await bed.task(submitted.id)).toMatchObject({ status: TaskStatus.COMPLETED, workerId: b.workerId, retryCount: 1 });
    }),
    90_000,
  );

  it(
    'a worker whose event loop was blocked past staleAfterMs between two steps does not start the second after it resumes',
    withWorkerOutputOnFailure(async () => {
      const blockMs = 3 * bed.timings.staleAfterMs;
      const a = bed.startWorker({ label: 'A' });
      const b = bed.startWorker({ label: 'B' });
      await Promise.all([a.ready, b.ready]);
      const submitted = await bed.workflows.submit('chaos-block', { where: 'between-steps', blockMs }, { maxRetries: 3 });

      const finished = await bed.workflows.waitFor(submitted.id, { timeoutMs: 30_000 });
      const [first] = await bed.effects(submitted.id);
      const [blocked, other] = first.worker_id === a.workerId ? [a, b] : [b, a];
      expect(finished).toMatchObject({ status: TaskStatus.COMPLETED, workerId: other.workerId, retryCount: 1 });
      await eventually('the blocked worker let go of the task', async () => (await stats(blocked)).running === 0, { timeoutMs: 10_000 });
      await sleep(500); // every chance to start s2

      // s1 ran once, in the blocked worker (the other found its checkpoint); s2 ran once, in the other worker only.
      const effects = (await bed.effects(submitted.id)).map((effect) => [effect.step_key, effect.worker_id]);
      expect(effects).toEqual([
        ['s1', blocked.workerId],
        ['s2', other.workerId],
      ]);
      expect((await stats(blocked)).stopped).toBe(1);
    }),
    60_000,
  );

  it(
    'a worker whose event loop was blocked past staleAfterMs between two compensations does not start the second after it resumes',
    withWorkerOutputOnFailure(async () => {
      const blockMs = 3 * bed.timings.staleAfterMs;
      const a = bed.startWorker({ label: 'A' });
      const b = bed.startWorker({ label: 'B' });
      await Promise.all([a.ready, b.ready]);
      const submitted = await bed.workflows.submit('chaos-block', { where: 'between-compensations', blockMs }, { maxRetries: 3 });

      const finished = await bed.workflows.waitFor(submitted.id, { timeoutMs: 30_000 });
      const compensations = await bed.compensations(submitted.id);
      const blockedId = compensations[0].worker_id;
      const [blocked, other] = blockedId === a.workerId ? [a, b] : [b, a];
      expect(finished).toMatchObject({ status: TaskStatus.ROLLED_BACK, workerId: other.workerId });
      await eventually('the blocked worker let go of the task', async () => (await stats(blocked)).running === 0, { timeoutMs: 10_000 });
      await sleep(500); // every chance to start the compensation of s1

      // s2's compensation ran (and was checkpointed) in the blocked worker; s1's ran once, in the other worker only.
      expect((await bed.compensations(submitted.id)).map((row) => [row.step_key, row.worker_id])).toEqual([
        ['s2', blocked.workerId],
        ['s1', other.workerId],
      ]);
      expect((await bed.effects(submitted.id)).map((effect) => effect.step_key)).toEqual(['s1', 's2', 's3']);
    }),
    60_000,
  );
});
