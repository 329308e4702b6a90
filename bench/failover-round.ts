import { Client } from 'pg';
import { FailoverPair, FailoverTimes } from '../test/support/failover-pair';
import { eventually, sleep } from '../test/support/waiting';
import { WorkerProcess } from '../test/support/worker-process';
import type { FailoverProbe, FailoverWorkerRequest } from './failover-worker';
import { FAILOVER_BENCH_WORKFLOW, FailoverBenchKind, FINAL_STATUS, PLANNED_STEPS } from './failover-workflows';
import { progress } from './stats';

export type FailoverWorker = WorkerProcess<FailoverWorkerRequest>;

/** What one failover under load came to. */
export interface RoundResult {
  round: number;
  synchronous: boolean;
  /** Bytes of WAL the standby had not replayed, read just before the kill. */
  lagBytes: number | null;
  times: FailoverTimes;
  /** First failed statement → first answered claim, over both workers (ms); and → first claim that took a task. */
  windowMs: number | null;
  windowToTaskMs: number | null;
  submitted: number;
  /** Submits acknowledged (submit() returned) whose task the new primary does not have. */
  submitsLost: number;
  finished: number;
  wrongStatus: number;
  stepsCompleted: number;
  /** Step bodies run more than once (any cause). */
  stepsRunTwice: number;
  /** Checkpoints the worker was told were written, whose step's body ran again afterwards (a lost checkpoint). */
  checkpointsLost: number;
  checkpointsAcked: number;
  /** Completions the worker was told were written, of tasks that ran a step again afterwards. */
  completionsLost: number;
  /** Signals acknowledged, then missing (sent again so the task could finish). */
  signalsLost: number;
  deadLetters: number;
  /** Tasks left unfinished when the round gave up waiting. */
  stuck: number;
  /** Each lost checkpoint: its task's kind and final status, whether its body ran again, whether its row is there. */
  lost: string[];
}

const KINDS: FailoverBenchKind[] = ['steps', 'saga', 'sleep', 'signal'];

/** Submits `count` tasks through the workers (each retried through the outage under its idempotency key) and signals the signal tasks. */
async function submitAll(
  round: number,
  count: number,
  workers: FailoverWorker[],
  acked: Map<string, FailoverBenchKind>,
  signals: Set<string>,
) {
  const sends: Array<Promise<void>> = [];
  for (let n = 0; n < count; n++) {
    const kind = KINDS[n % KINDS.length];
    const worker = workers[n % workers.length];
    const task = await retry(() =>
      worker.call<{ id: string }>('WorkflowService', 'submit', FAILOVER_BENCH_WORKFLOW, { kind, n }, { idempotencyKey: `r${round}-${n}` }),
    );
    acked.set(task.id, kind);
    if (kind === 'signal') sends.push(sendSignal(workers[(n + 1) % workers.length], task.id, signals));
    await sleep(8);
  }
  await Promise.all(sends);
}

async function sendSignal(worker: FailoverWorker, taskId: string, signals: Set<string>): Promise<void> {
  await retry(() => worker.call('WorkflowService', 'signal', taskId, 'go', { taskId }));
  signals.add(taskId);
}

async function retry<T>(body: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      return await body();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await sleep(100);
    }
  }
}

/** Replication lag of the standby now, in bytes (null without a standby). */
async function lagBytes(pair: FailoverPair, database: string): Promise<number | null> {
  const [row] = await pair.query<{ lag: string | null }>(
    database,
    `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::text AS lag FROM pg_stat_replication`,
  );
  return row?.lag == null ? null : Number(row.lag);
}

/** One failover under load: tasks submitted, the failover half-way, a new standby, every task waited for and checked. */
export async function failoverRound(options: {
  round: number;
  pair: FailoverPair;
  database: string;
  workers: FailoverWorker[];
  effects: Client;
  tasks: number;
  synchronous: boolean;
}): Promise<RoundResult> {
  const { pair, database, workers, round } = options;
  await Promise.all(workers.map((worker) => worker.request<FailoverProbe>({ type: 'probe' })));
  const acked = new Map<string, FailoverBenchKind>();
  const signals = new Set<string>();
  const submitting = submitAll(round, options.tasks, workers, acked, signals);
  await eventually('half the round submitted', () => acked.size >= options.tasks / 2, { timeoutMs: 120_000 });
  const lag = await lagBytes(pair, database).catch(() => null);
  const times = await pair.failover();
  progress(`round ${round}: failover done (killed → moved ${times.movedAt - times.killedAt} ms), adding a standby`);
  await pair.addStandby();
  await submitting;
  const signalsLost = await waitForTasks(pair, database, acked, signals, workers);
  const probes = await Promise.all(workers.map((worker) => worker.request<FailoverProbe>({ type: 'probe' })));
  return {
    round,
    synchronous: options.synchronous,
    lagBytes: lag,
    times,
    ...window(probes, times),
    ...(await count(options, acked, probes)),
    signalsLost,
  };
}

/** Waits until every acknowledged task that exists is finished; a signal task waiting with no signal kept gets its signal again. */
async function waitForTasks(
  pair: FailoverPair,
  database: string,
  acked: Map<string, FailoverBenchKind>,
  signals: Set<string>,
  workers: FailoverWorker[],
) {
  const ids = [...acked.keys()];
  let resent = 0;
  const deadline = Date.now() + 180_000;
  while (Date.now() < deadline) {
    const [row] = await pair.query<{ left: number }>(
      database,
      `SELECT count(*)::int AS left FROM agent_tasks WHERE id = ANY($1::uuid[]) AND status IN ('pending', 'running')`,
      [ids],
    );
    if (row.left === 0) return resent;
    const orphans = await pair.query<{ id: string }>(
      database,
      `SELECT t.id FROM agent_tasks t JOIN step_runs s ON s.task_id = t.id AND s.kind = 'signal' AND s.status = 'waiting'
       WHERE t.id = ANY($1::uuid[]) AND t.status = 'pending' AND NOT EXISTS (SELECT 1 FROM task_signals g WHERE g.task_id = t.id)`,
      [ids.filter((id) => signals.has(id))],
    );
    for (const { id } of orphans) {
      resent++;
      await sendSignal(workers[0], id, signals);
    }
    await sleep(500);
  }
  return resent;
}

/** First failed statement at or after the kill → first answered claim after it, over both workers. */
function window(probes: FailoverProbe[], times: FailoverTimes): { windowMs: number | null; windowToTaskMs: number | null } {
  const failures = probes.flatMap((probe) => probe.failures).filter((failure) => failure.at >= times.killedAt);
  if (!failures.length) return { windowMs: null, windowToTaskMs: null };
  const start = Math.min(...failures.map((failure) => failure.at));
  const claims = probes.flatMap((probe) => probe.claims).filter((claim) => claim.at > times.movedAt);
  const first = (list: typeof claims) => (list.length ? Math.min(...list.map((claim) => claim.at)) - start : null);
  return { windowMs: first(claims), windowToTaskMs: first(claims.filter((claim) => claim.claimed > 0)) };
}

type Counted = Omit<RoundResult, 'round' | 'synchronous' | 'lagBytes' | 'times' | 'windowMs' | 'windowToTaskMs' | 'signalsLost'>;

/** What the new primary holds for the round's acknowledged tasks, against their plans and the effects on record. */
async function count(
  options: { pair: FailoverPair; database: string; effects: Client },
  acked: Map<string, FailoverBenchKind>,
  probes: FailoverProbe[],
): Promise<Counted> {
  const ids = [...acked.keys()];
  const tasks = await options.pair.query<{ id: string; status: string }>(
    options.database,
    `SELECT id, status FROM agent_tasks WHERE id = ANY($1::uuid[])`,
    [ids],
  );
  const steps = await options.pair.query<{ task_id: string; step_key: string }>(
    options.database,
    `SELECT task_id, step_key FROM step_runs WHERE task_id = ANY($1::uuid[]) AND status = 'completed' AND kind IS NULL`,
    [ids],
  );
  const [{ n: deadLetters }] = await options.pair.query<{ n: number }>(
    options.database,
    `SELECT count(*)::int AS n FROM dead_letter_queue WHERE task_id = ANY($1::uuid[])`,
    [ids],
  );
  const { rows: runs } = await options.effects.query<{ key: string; ats: number[] }>(
    `SELECT task_id || '/' || step_key AS key, array_agg(at_ms ORDER BY at_ms) AS ats FROM failover_effects
     WHERE kind = 'step' AND task_id = ANY($1::uuid[]) GROUP BY 1`,
    [ids],
  );
  const bodyRuns = new Map(runs.map((run) => [run.key, run.ats.map(Number)]));
  const checkpoints = new Map<string, number>(probes.flatMap((probe) => probe.checkpoints));
  const ranAfter = (key: string, at: number) => (bodyRuns.get(key) ?? []).some((run) => run > at);
  const lastRun = (taskId: string) =>
    Math.max(0, ...[...bodyRuns].filter(([key]) => key.startsWith(`${taskId}/`)).flatMap(([, ats]) => ats));
  const done = new Set(steps.map((step) => `${step.task_id}/${step.step_key}`));
  return {
    submitted: acked.size,
    submitsLost: acked.size - tasks.length,
    finished: tasks.filter((task) => !['pending', 'running'].includes(task.status)).length,
    // Not in the status its plan implies, or in it with a planned step missing.
    wrongStatus: tasks.filter((task) => {
      const kind = acked.get(task.id)!;
      return task.status !== FINAL_STATUS[kind] || (kind !== 'timed' && PLANNED_STEPS[kind].some((key) => !done.has(`${task.id}/${key}`)));
    }).length,
    stepsCompleted: steps.length,
    stepsRunTwice: runs.filter((run) => run.ats.length > 1).length,
    checkpointsAcked: checkpoints.size,
    checkpointsLost: [...checkpoints].filter(([key, at]) => ranAfter(key, at) || !done.has(key)).length,
    lost: [...checkpoints]
      .filter(([key, at]) => ranAfter(key, at) || !done.has(key))
      .map(([key, at]) => {
        const task = tasks.find((one) => key.startsWith(`${one.id}/`));
        return `${key.split('/')[1]} of a ${acked.get(task?.id ?? '') ?? '?'} task now ${task?.status ?? 'gone'}: ${ranAfter(key, at) ? 'ran again' : 'not run again'}, row ${done.has(key) ? 'there' : 'missing'}`;
      }),
    completionsLost: probes.flatMap((probe) => probe.completions).filter(([id, at]) => lastRun(id) > at).length,
    deadLetters,
    stuck: tasks.filter((task) => ['pending', 'running'].includes(task.status)).length,
  };
}
