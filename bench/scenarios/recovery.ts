import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { resolveDuraflowOptions } from '@duraflow/nestjs/config/resolved-options';
import { SHORT_INTERVALS } from '../config';
import { BenchContext, rawSection } from '../context';
import { BenchDuraflowOptions } from '../protocol';
import { eventually, sleep } from '../../test/support/waiting';
import { median, progress } from '../stats';
import { BenchWorkerProcess } from '../worker-process';
import { RECOVER_WORKFLOW } from '../workflows';

interface RecoveryRun {
  /** Age of the victim's last heartbeat when it was killed. */
  heartbeatAgeAtKillMs: number;
  /** Kill -> the task `running` again under the other process's worker id. */
  reclaimedMs: number;
  /** Kill -> the task `completed` by the other process. */
  completedMs: number;
  /** reclaimedMs minus the time the task took to go stale (staleAfter - heartbeat age): the reaper's and the claim's share. */
  afterStaleMs: number;
  retryCount: number;
  rescuerLeads: boolean;
  /** Reaper passes the surviving leader ran in a window after the recovery (last run only). */
  cadence?: { windowMs: number; passes: number; meanIntervalMs: number };
}

interface TaskRow {
  status: string;
  worker_id: string | null;
  retry_count: number;
}

function shortIntervals(workerId: string, workerEnabled: boolean): BenchDuraflowOptions {
  return {
    workerId,
    heartbeatIntervalMs: SHORT_INTERVALS.heartbeatIntervalMs,
    reaper: { intervalMs: SHORT_INTERVALS.reaperIntervalMs, staleAfterMs: SHORT_INTERVALS.staleAfterMs },
    worker: { enabled: workerEnabled },
  };
}

/**
 * One recovery: the victim process (reaper leader) runs a task whose step hangs; a second
 * process idles with its worker started; the victim is SIGKILLed; the task's row is polled
 * every few ms until the second process has claimed it and completed it.
 */
async function recoverOnce(ctx: BenchContext, run: number, cadenceWindowMs?: number): Promise<RecoveryRun> {
  const { client } = ctx.db;
  await ctx.db.truncate();
  const tag = randomBytes(3).toString('hex');
  const victim = BenchWorkerProcess.start({
    databaseUrl: ctx.db.url,
    label: `victim${run}`,
    duraflow: shortIntervals(`bench-victim-${tag}`, true),
  });
  let rescuer: BenchWorkerProcess | undefined;
  try {
    await victim.ready;
    await eventually('the victim leads the reaper', () => victim.isLeader(), { timeoutMs: 10_000 });
    rescuer = BenchWorkerProcess.start({
      databaseUrl: ctx.db.url,
      label: `rescuer${run}`,
      duraflow: shortIntervals(`bench-rescuer-${tag}`, false),
    });
    await rescuer.ready;

    const { rows } = await client.query<{ id: string }>(`INSERT INTO agent_tasks (workflow_name, input) VALUES ($1, '{}') RETURNING id`, [
      RECOVER_WORKFLOW,
    ]);
    const taskId = rows[0].id;
    const read = async (): Promise<TaskRow> =>
      (await client.query<TaskRow>('SELECT status, worker_id, retry_count FROM agent_tasks WHERE id = $1', [taskId])).rows[0];
    await eventually(
      'the victim claimed the task',
      async () => {
        const task = await read();
        return task.status === 'running' && task.worker_id === victim.workerId;
      },
      { timeoutMs: 10_000, everyMs: 10 },
    );
    await rescuer.startWorker();
    // A few heartbeats, and a kill at no particular phase of the heartbeat.
    await sleep(300 + Math.random() * SHORT_INTERVALS.heartbeatIntervalMs);

    const age = await client.query<{ age_ms: number }>(
      `SELECT (extract(epoch FROM clock_timestamp() - heartbeat_at) * 1000)::float8 AS age_ms FROM agent_tasks WHERE id = $1`,
      [taskId],
    );
    const killedAt = performance.now();
    victim.kill('SIGKILL');
    const heartbeatAgeAtKillMs = Number(age.rows[0].age_ms);

    let reclaimedAt: number | undefined;
    let last: TaskRow | undefined;
    await eventually(
      'the task has ended in the other process',
      async () => {
        last = await read();
        if (
          reclaimedAt === undefined &&
          last.worker_id === rescuer!.workerId &&
          (last.status === 'running' || last.status === 'completed')
        ) {
          reclaimedAt = performance.now();
        }
        return last.status === 'completed' || last.status === 'failed';
      },
      { timeoutMs: 30_000, everyMs: 5 },
    );
    const completedAt = performance.now();
    if (last?.status !== 'completed' || reclaimedAt === undefined) throw new Error(`the task ended ${JSON.stringify(last)}`);
    const reclaimedMs = reclaimedAt - killedAt;
    let cadence: RecoveryRun['cadence'];
    if (cadenceWindowMs) {
      // How often the leader really reaps: counted from its duraflow_reap statements.
      // duraflow_reap (unfenced), duraflow_reap_leased / duraflow_reap_until (the leader's fenced passes).
      const reaps = (counts: Record<string, number>) =>
        Object.entries(counts).reduce((sum, [name, count]) => (name.startsWith('duraflow_reap') ? sum + count : sum), 0);
      const before = reaps(await rescuer.queryCounts());
      const from = performance.now();
      await sleep(cadenceWindowMs);
      const passes = reaps(await rescuer.queryCounts()) - before;
      const windowMs = performance.now() - from;
      if (!passes) {
        throw new Error(
          `the surviving leader sent no duraflow_reap* statement in ${Math.round(windowMs)} ms: if the reaping statement was renamed, update bench/scenarios/recovery.ts`,
        );
      }
      cadence = { windowMs, passes, meanIntervalMs: windowMs / passes };
    }
    return {
      cadence,
      heartbeatAgeAtKillMs,
      reclaimedMs,
      completedMs: completedAt - killedAt,
      afterStaleMs: reclaimedMs - (SHORT_INTERVALS.staleAfterMs - heartbeatAgeAtKillMs),
      retryCount: last.retry_count,
      rescuerLeads: await rescuer.isLeader(),
    };
  } finally {
    victim.kill('SIGKILL');
    await victim.exited;
    await rescuer?.stop();
  }
}

/** Measured with short intervals; the default-interval figure is computed from the defaults. */
export async function recoveryScenario(ctx: BenchContext): Promise<void> {
  const runs: RecoveryRun[] = [];
  for (let run = 1; run <= ctx.sizes.recoveryRuns; run++) {
    progress(`recovery after SIGKILL, run ${run}/${ctx.sizes.recoveryRuns}`);
    const last = run === ctx.sizes.recoveryRuns;
    runs.push(await recoverOnce(ctx, run, last ? (ctx.quick ? 1_000 : 3_000) : undefined));
  }
  await ctx.db.truncate();
  const { heartbeatIntervalMs, staleAfterMs, reaperIntervalMs } = SHORT_INTERVALS;
  const worstAfterStale = Math.max(...runs.map((run) => run.afterStaleMs));
  Object.assign(rawSection(ctx, 'recovery'), { intervals: SHORT_INTERVALS, runs });
  const intervals = `heartbeat ${heartbeatIntervalMs} ms, staleAfter ${staleAfterMs} ms, reaper ${reaperIntervalMs} ms; the victim led the reaper`;
  ctx.results.set(
    'recovery.reclaimed',
    median(runs.map((run) => run.reclaimedMs)),
    `median of ${runs.length}; ${intervals}; stale->claimed max ${worstAfterStale.toFixed(0)} ms${cadenceNote(runs)}`,
  );
  ctx.results.set('recovery.completed', median(runs.map((run) => run.completedMs)), `median of ${runs.length}`);

  // Computed, not measured: a task goes stale staleAfter - (heartbeat age at the kill) after it,
  // and the leader reaps on its next tick, up to one reaper interval later.
  const defaults = resolveDuraflowOptions({});
  const stale = defaults.reaper.staleAfterMs / 1000;
  const beat = defaults.heartbeatIntervalMs / 1000;
  const reap = defaults.reaper.intervalMs / 1000;
  const expected = stale - beat / 2 + reap / 2;
  const worst = stale + reap;
  rawSection(ctx, 'recovery').defaults = {
    staleAfterS: stale,
    heartbeatS: beat,
    reaperIntervalS: reap,
    bestS: stale - beat,
    expectedS: expected,
    worstS: worst,
  };
  ctx.results.set(
    'recovery.default.expected',
    expected,
    `computed: ${stale} s stale - ${beat}/2 s mean heartbeat age + ${reap}/2 s mean reaper wait; best ${stale - beat} s`,
  );
  let stretched = '';
  const cadence = runs.find((run) => run.cadence)?.cadence;
  if (cadence && cadence.meanIntervalMs > reaperIntervalMs * 1.1) {
    // A tick whose leader check ran a little faster than the previous one finds less than
    // intervalMs since the last reap and skips it: reaps come every 1 or 2 ticks.
    const factor = cadence.meanIntervalMs / reaperIntervalMs;
    stretched =
      `; the reaper measured above ran every ${factor.toFixed(2)} intervals on average (up to 2): ` +
      `at that cadence the defaults give ${(stale - beat / 2 + (reap * factor) / 2).toFixed(1)} s expected, ${stale + 2 * reap} s worst`;
  }
  ctx.results.set(
    'recovery.default.worst',
    worst,
    `computed: ${stale} s stale (heartbeat just before the kill) + ${reap} s (reaper tick just missed)${stretched}`,
  );
}

function cadenceNote(runs: RecoveryRun[]): string {
  const cadence = runs.find((run) => run.cadence)?.cadence;
  if (!cadence) return '';
  return `; the leader reaped every ${cadence.meanIntervalMs.toFixed(0)} ms on average (${cadence.passes} passes in ${(cadence.windowMs / 1000).toFixed(1)} s)`;
}
