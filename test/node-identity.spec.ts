import { InvalidDuraflowOptionsError, NodeIdInUseError, StepRun, TaskStatus, WorkerStats } from '@duraflow/nestjs';
import { resolveDuraflowOptions } from '@duraflow/nestjs/config/resolved-options';
import { ChaosBed } from './fixtures/chaos/chaos-bed';
import { useTestBed } from './support/test-bed';
import { eventually, sleep } from './support/waiting';
import { withWorkerOutputOnFailure, WorkerProcess } from './support/worker-process';

/**
 * A node (`worker.nodeId`) restarted in place takes its tasks back at boot. The reaper's limit is
 * ten minutes here, far beyond every wait of these tests: whatever runs a task again within them
 * is the node's own recovery, never the reaper.
 */
const TIMINGS = { heartbeatIntervalMs: 100, staleAfterMs: 600_000, reaperIntervalMs: 200 };

const testBed = useTestBed({ databasePerTest: true });
const bed = new ChaosBed(testBed, ['chaos-steps'], TIMINGS);
beforeEach(() => bed.setUp());

function startNode(label: string, nodeId: string): WorkerProcess {
  return bed.startWorker({ label, duraflow: { worker: { nodeId } } });
}

async function stats(worker: WorkerProcess): Promise<WorkerStats> {
  return worker.call<WorkerStats>('WorkerService', 'stats');
}

/** The worker id the library gave the process: `<nodeId>#<8 hex digits>`. */
async function workerIdOf(worker: WorkerProcess): Promise<string> {
  return (await stats(worker)).workerId;
}

async function completedSteps(taskId: string): Promise<string[]> {
  return (await bed.steps(taskId)).filter((step: StepRun) => step.status === 'completed').map((step) => step.stepKey);
}

/** The PostgreSQL session that holds the node lock of the process `workerId` (its application_name). */
async function lockSessions(workerId: string): Promise<number[]> {
  const { rows } = await bed.db.client.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = left('duraflow-node ' || $1, 63)`,
    [workerId],
  );
  return rows.map((row) => row.pid);
}

describe('a node restarted in place (worker.nodeId)', () => {
  it(
    'takes back the task its killed process held at once, without waiting for staleAfterMs, and runs no finished step again',
    withWorkerOutputOnFailure(async () => {
      const first = startNode('first', 'node-a');
      await first.ready;
      const firstId = await workerIdOf(first);
      expect(firstId).toMatch(/^node-a#[0-9a-f]{8}$/);
      const submitted = await bed.workflows.submit('chaos-steps', { steps: 5, stepMs: 600 }, { maxRetries: 3 });
      await eventually('two steps are checkpointed', async () => (await completedSteps(submitted.id)).length >= 2, {
        timeoutMs: 20_000,
      });
      const checkpointedBeforeKill = await completedSteps(submitted.id);
      expect((await bed.task(submitted.id)).workerId).toBe(firstId);

      first.kill('SIGKILL');
      await first.exited;
      const killedAt = Date.now();
      const restarted = startNode('restarted', 'node-a');
      const ready = await restarted.ready;
      const restartedId = await workerIdOf(restarted);
      expect(restartedId).toMatch(/^node-a#[0-9a-f]{8}$/);
      expect(restartedId).not.toBe(firstId);
      await eventually('the restarted process runs the task', () => bed.task(submitted.id), {
        until: (task) => task.status === TaskStatus.RUNNING && task.workerId === restartedId,
        timeoutMs: 30_000,
      });
      const runningAgainMs = Date.now() - killedAt;
      console.log(
        `node-identity: SIGKILL -> restart -> task running again in ${runningAgainMs} ms ` +
          `(the new process's fork to ready: ${ready.startupMs} ms; staleAfterMs ${TIMINGS.staleAfterMs} ms never came)`,
      );

      const finished = await bed.workflows.waitFor(submitted.id, { timeoutMs: 30_000 });
      expect(finished.status).toBe(TaskStatus.COMPLETED);
      expect(finished.workerId).toBe(restartedId);
      // The recovery counts a retry, as the reaper would: a task that kills its process every time runs out of them.
      expect(finished.retryCount).toBe(1);
      const effects = await bed.effects(submitted.id);
      for (const key of checkpointedBeforeKill) {
        expect(effects.filter((effect) => effect.step_key === key)).toEqual([expect.objectContaining({ pid: first.pid })]);
      }
      expect(new Set(effects.map((effect) => effect.step_key))).toEqual(new Set(['s1', 's2', 's3', 's4', 's5']));
    }),
    90_000,
  );

  it(
    'refuses to start a second live process with the same node id (NodeIdInUseError), and the first goes on',
    withWorkerOutputOnFailure(async () => {
      const first = startNode('first', 'node-b');
      await first.ready;
      const firstId = await workerIdOf(first);

      const second = startNode('second', 'node-b');
      expect((await second.exited).code).toBe(1);
      expect(second.output.join('\n')).toMatch(/NodeIdInUseError: Node id "node-b" \(worker\.nodeId\) is in use: another live process/);

      const refused = await testBed.bootFailure({ duraflow: { worker: { nodeId: 'node-b' }, reaper: { enabled: false } } });
      expect(refused).toBeInstanceOf(NodeIdInUseError);
      expect(refused).toMatchObject({ code: 'NODE_ID_IN_USE', nodeId: 'node-b' });
      // It names the holder: the first process's lock session.
      expect((refused as Error).message).toContain(`duraflow-node ${firstId}`.slice(0, 63));
      expect((refused as Error).message).toMatch(/stop the other process first|give this one another id/);

      const task = await bed.workflows.submit('chaos-steps', { steps: 1, stepMs: 10 });
      const finished = await bed.workflows.waitFor(task.id, { timeoutMs: 20_000 });
      expect(finished).toMatchObject({ status: TaskStatus.COMPLETED, workerId: firstId });
      expect(await lockSessions(firstId)).toHaveLength(1);
    }),
    90_000,
  );

  it(
    'lets a new process replace a frozen one whose lock session was cut: it takes the task back, and the old one, woken, is fenced and stops claiming',
    withWorkerOutputOnFailure(async () => {
      const old = startNode('old', 'node-c');
      await old.ready;
      const oldId = await workerIdOf(old);
      const submitted = await bed.workflows.submit('chaos-steps', { steps: 4, stepMs: 1_000 }, { maxRetries: 3 });
      // Frozen inside s2's body (its effect recorded, its sleep going on): nothing of it is in flight.
      await eventually('s2 has started', async () => (await bed.effects(submitted.id)).some((effect) => effect.step_key === 's2'), {
        timeoutMs: 20_000,
      });
      old.kill('SIGSTOP');
      const frozenAt = new Date();

      // Frozen, it still holds the node's lock: a new process refuses.
      const early = startNode('early', 'node-c');
      expect((await early.exited).code).toBe(1);
      expect(early.output.join('\n')).toMatch(/NodeIdInUseError/);

      // Its lock session is cut (a network failure the server noticed): the lock is free.
      const [lockPid] = await lockSessions(oldId);
      expect(lockPid).toBeDefined();
      await bed.db.client.query('SELECT pg_terminate_backend($1)', [lockPid]);
      await eventually('the old lock session is gone', () => lockSessions(oldId), { until: (pids) => pids.length === 0 });

      const replacement = startNode('replacement', 'node-c');
      await replacement.ready;
      const replacementId = await workerIdOf(replacement);
      await eventually('the replacement runs the task', () => bed.task(submitted.id), {
        until: (task) => task.workerId === replacementId,
        timeoutMs: 30_000,
      });
      expect((await bed.task(submitted.id)).retryCount).toBe(1);

      old.kill('SIGCONT');
      await eventually('the woken process stops its worker', () => stats(old), {
        until: (woken) => woken.state === 'stopped',
        timeoutMs: 30_000,
      });
      const woken = await stats(old);
      // Its run was stopped by the fence (its heartbeat found the claim gone), never completed.
      expect(woken).toMatchObject({ completed: 0, stopped: 1, claimed: 1 });

      const finished = await bed.workflows.waitFor(submitted.id, { timeoutMs: 30_000 });
      expect(finished).toMatchObject({ status: TaskStatus.COMPLETED, workerId: replacementId, retryCount: 1 });
      const effects = await bed.effects(submitted.id);
      expect(new Set(effects.map((effect) => effect.step_key))).toEqual(new Set(['s1', 's2', 's3', 's4']));

      // It claims no more: new tasks all run on the replacement.
      const more = await Promise.all([1, 2, 3].map(() => bed.workflows.submit('chaos-steps', { steps: 1, stepMs: 10 })));
      for (const task of more) {
        expect(await bed.workflows.waitFor(task.id, { timeoutMs: 20_000 })).toMatchObject({
          status: TaskStatus.COMPLETED,
          workerId: replacementId,
        });
      }
      // Woken, it ran no step body again: its run in s2 ended at the fence.
      expect((await stats(old)).claimed).toBe(1);
      const { rows } = await bed.db.client.query(`SELECT count(*)::int AS n FROM chaos_effects WHERE pid = $1 AND at > $2`, [
        old.pid,
        frozenAt,
      ]);
      expect(rows[0].n).toBe(0);
    }),
    120_000,
  );

  it(
    'takes its lock back after its session was cut while no other process runs as the node, and goes on claiming',
    withWorkerOutputOnFailure(async () => {
      const worker = startNode('only', 'node-d');
      await worker.ready;
      const workerId = await workerIdOf(worker);
      const [lockPid] = await lockSessions(workerId);
      await bed.db.client.query('SELECT pg_terminate_backend($1)', [lockPid]);
      await eventually('the lock is held again on a new session', () => lockSessions(workerId), {
        until: (pids) => pids.length === 1 && pids[0] !== lockPid,
        timeoutMs: 20_000,
      });
      await sleep(200);
      const task = await bed.workflows.submit('chaos-steps', { steps: 1, stepMs: 10 });
      expect(await bed.workflows.waitFor(task.id, { timeoutMs: 20_000 })).toMatchObject({ status: TaskStatus.COMPLETED, workerId });
      expect((await stats(worker)).state).toBe('running');
    }),
    60_000,
  );
});

describe('what a node takes back at boot', () => {
  it('takes the running tasks of its earlier processes (worker ids <nodeId>#<8 hex digits>, or the node id itself) and no other', async () => {
    const holders = {
      earlier: 'node-e#0123abcd',
      plain: 'node-e',
      otherNode: 'node-ee#0123abcd',
      prefixOnly: 'node',
      notAnIncarnation: 'node-e#0123abcd-x',
      upperCase: 'node-e#0123ABCD',
      stranger: 'chaos-someone-else',
    };
    const ids: Record<string, string> = {};
    for (const [name, workerId] of Object.entries(holders)) {
      const { id } = await bed.workflows.submit('chaos-steps', { steps: 1, stepMs: 10 });
      // A process that died holding it, its heartbeat fresh: the reaper would wait staleAfterMs.
      await bed.db.client.query(
        `UPDATE agent_tasks SET status = 'running', worker_id = $2, claim_token = gen_random_uuid(), heartbeat_at = now(), started_at = now() WHERE id = $1`,
        [id, workerId],
      );
      ids[name] = id;
    }
    // A node that registers no chaos workflow: it takes the tasks back, and does not run them.
    await testBed.start({ duraflow: { worker: { nodeId: 'node-e' }, reaper: { enabled: false } } });
    const after = async (name: string) => bed.task(ids[name]);
    for (const name of ['earlier', 'plain']) {
      expect(await after(name)).toMatchObject({ status: TaskStatus.PENDING, workerId: null, retryCount: 1 });
    }
    for (const name of ['otherNode', 'prefixOnly', 'notAnIncarnation', 'upperCase', 'stranger']) {
      expect(await after(name)).toMatchObject({
        status: TaskStatus.RUNNING,
        workerId: holders[name as keyof typeof holders],
        retryCount: 0,
      });
    }
  });
});

describe('the nodeId option', () => {
  it('makes the worker id <nodeId>#<8 hex digits>, new in each process, and leaves it alone without one', () => {
    const [one, two] = [resolveDuraflowOptions({ worker: { nodeId: 'web-0' } }), resolveDuraflowOptions({ worker: { nodeId: 'web-0' } })];
    expect(one.workerId).toMatch(/^web-0#[0-9a-f]{8}$/);
    expect(two.workerId).not.toBe(one.workerId);
    expect(one.worker.nodeId).toBe('web-0');
    expect(resolveDuraflowOptions({ workerId: 'w-1' })).toMatchObject({ workerId: 'w-1', worker: { nodeId: undefined } });
  });

  it.each([
    ['with a workerId', { workerId: 'w-1', worker: { nodeId: 'web-0' } }, /"workerId" cannot be given with worker\.nodeId/],
    ['empty', { worker: { nodeId: '' } }, /"worker\.nodeId" must be a non-empty string of at most 246 characters/],
    ['too long for a worker id', { worker: { nodeId: 'n'.repeat(247) } }, /at most 246 characters/],
    [
      'behind pgbouncer without listenUrl',
      { pooler: 'pgbouncer-transaction' as const, worker: { nodeId: 'web-0' } },
      /"worker\.nodeId" needs listenUrl with pooler 'pgbouncer-transaction'/,
    ],
  ])('is refused %s, at boot, with InvalidDuraflowOptionsError', (_, options, message) => {
    expect(() => resolveDuraflowOptions(options)).toThrow(InvalidDuraflowOptionsError);
    expect(() => resolveDuraflowOptions(options)).toThrow(message);
  });
});
