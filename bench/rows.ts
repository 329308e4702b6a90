import { DRAIN_STEPS } from './config';

/**
 * What a figure is compared with:
 * - `tps1` / `tps4`: a throughput, divided by the pgbench one-row INSERT tx/s at 1 / 4 clients;
 * - `time1`: a duration, divided by the time of one such commit at 1 client (1 / tx/s), i.e.
 *   "as long as N sequential one-row INSERT commits";
 * - `none`: not comparable (memory, computed figures).
 */
export type RatioBasis = 'tps1' | 'tps4' | 'time1' | 'none';

export interface RowDefinition {
  id: string;
  figure: string;
  unit: string;
  ratio: RatioBasis;
  /** A drain: also divided by the pgbench SKIP LOCKED claim tx/s of the same run (row 3). */
  vsClaim?: boolean;
}

function drainRows(): RowDefinition[] {
  const rows: RowDefinition[] = [];
  for (const processes of [1, 2]) {
    for (const concurrency of [10, 50]) {
      for (const steps of DRAIN_STEPS) {
        const where = `${steps}-step, concurrency ${concurrency}, ${processes} process${processes > 1 ? 'es' : ''}`;
        rows.push({
          id: drainRowId(steps, concurrency, processes, 'tasks'),
          figure: `Drain ${where}`,
          unit: 'tasks/s',
          ratio: 'tps4',
          vsClaim: true,
        });
        if (steps > 0) {
          rows.push({
            id: drainRowId(steps, concurrency, processes, 'steps'),
            figure: `Drain ${where}`,
            unit: 'steps/s',
            ratio: 'tps4',
            vsClaim: true,
          });
        }
      }
    }
  }
  return rows;
}

/** Drains of tasks submitted through the API into a table whose statistics predate them, and the same analyzed. */
export type SubmittedDrain = 'submit.stale' | 'submit.fresh' | 'submitMany.stale' | 'submitMany.fresh';

export const SUBMITTED_DRAINS: Array<{ kind: SubmittedDrain; via: 'submit' | 'submitMany'; analyzed: boolean }> = [
  { kind: 'submit.stale', via: 'submit', analyzed: false },
  { kind: 'submitMany.stale', via: 'submitMany', analyzed: false },
  { kind: 'submit.fresh', via: 'submit', analyzed: true },
  { kind: 'submitMany.fresh', via: 'submitMany', analyzed: true },
];

function submittedDrainRows(): RowDefinition[] {
  return SUBMITTED_DRAINS.map(({ kind, via, analyzed }) => ({
    id: `drain.${kind}`,
    figure: `Drain 0-step, concurrency 10, 1 process, tasks from ${via}() into a new database, ${analyzed ? 'analyzed before the drain' : 'statistics never gathered'}`,
    unit: 'tasks/s',
    ratio: 'tps4',
    vsClaim: true,
  }));
}

export function drainRowId(steps: number, concurrency: number, processes: number, what: 'tasks' | 'steps'): string {
  return `drain.${steps}step.c${concurrency}.p${processes}.${what}`;
}

/** Every row of the table, in order. The quick test checks each one is printed with a value. */
export const ROWS: RowDefinition[] = [
  { id: 'ref.insert.c1', figure: 'pgbench one-row INSERT, 1 client', unit: 'tx/s', ratio: 'tps1' },
  { id: 'ref.insert.c4', figure: 'pgbench one-row INSERT, 4 clients', unit: 'tx/s', ratio: 'tps1' },
  { id: 'ref.skiplocked.c4', figure: 'pgbench SKIP LOCKED claim of 1 row, 4 clients', unit: 'tx/s', ratio: 'tps4' },
  { id: 'ref.notify.c4', figure: 'pgbench one-row INSERT + pg_notify in one statement, 4 clients', unit: 'tx/s', ratio: 'tps4' },
  { id: 'submit.sequential', figure: 'submit(), one caller, sequential', unit: 'tasks/s', ratio: 'tps1' },
  { id: 'submit.concurrent', figure: 'submit(), 10 concurrent callers', unit: 'tasks/s', ratio: 'tps4' },
  { id: 'submit.batched', figure: 'submitMany(), one caller, batches', unit: 'tasks/s', ratio: 'tps1' },
  ...drainRows(),
  ...submittedDrainRows(),
  { id: 'step.overhead.run', figure: 'Per-step overhead, p50 (run start to end)', unit: 'ms', ratio: 'time1' },
  { id: 'step.floor', figure: 'Lone step checkpoint statement from node-postgres, p50', unit: 'ms', ratio: 'time1' },
  { id: 'step.ratio', figure: 'Per-step overhead ÷ lone checkpoint statement (p50s of this run; target ≤ 1.15)', unit: '×', ratio: 'none' },
  { id: 'step.overhead.e2e', figure: 'Per-step overhead, p50 (submit to terminal)', unit: 'ms', ratio: 'time1' },
  { id: 'latency.p50', figure: 'submit() to workflow start, idle worker, p50', unit: 'ms', ratio: 'time1' },
  { id: 'latency.p95', figure: 'submit() to workflow start, idle worker, p95', unit: 'ms', ratio: 'time1' },
  { id: 'claim.small', figure: 'Claim statement (batch of 10), 1k pending, p50', unit: 'ms', ratio: 'time1' },
  { id: 'claim.large', figure: 'Claim statement (batch of 10), 100k pending, p50', unit: 'ms', ratio: 'time1' },
  {
    id: 'claim.stale.small',
    figure: 'Claim statement (batch of 10), 1k pending, statistics never gathered, p50',
    unit: 'ms',
    ratio: 'time1',
  },
  {
    id: 'claim.stale.large',
    figure: 'Claim statement (batch of 10), 100k pending, statistics never gathered, p50',
    unit: 'ms',
    ratio: 'time1',
  },
  { id: 'recovery.reclaimed', figure: 'SIGKILL to re-claimed by another process (short intervals)', unit: 'ms', ratio: 'time1' },
  { id: 'recovery.completed', figure: 'SIGKILL to completed by another process (short intervals)', unit: 'ms', ratio: 'time1' },
  { id: 'recovery.default.expected', figure: 'Recovery with default intervals, expected (computed)', unit: 's', ratio: 'none' },
  { id: 'recovery.default.worst', figure: 'Recovery with default intervals, worst case (computed)', unit: 's', ratio: 'none' },
  { id: 'rss.drain.tasks', figure: 'Drain 0-step, concurrency 10, 1 process (RSS run)', unit: 'tasks/s', ratio: 'tps4', vsClaim: true },
  { id: 'rss.before', figure: 'Worker RSS before the drain', unit: 'MB', ratio: 'none' },
  { id: 'rss.first.half', figure: 'Worker RSS, peak over the first half of the drain', unit: 'MB', ratio: 'none' },
  { id: 'rss.second.half', figure: 'Worker RSS, peak over the second half of the drain', unit: 'MB', ratio: 'none' },
  { id: 'rss.after.gc', figure: 'Worker RSS after the drain and a full GC', unit: 'MB', ratio: 'none' },
  { id: 'prims.sleep.p50', figure: 'Sleep wake-up lateness (resumed − wake-up time), p50', unit: 'ms', ratio: 'none' },
  { id: 'prims.sleep.p95', figure: 'Sleep wake-up lateness, p95', unit: 'ms', ratio: 'none' },
  { id: 'prims.signal.p50', figure: 'Signal sent → run resumed, p50', unit: 'ms', ratio: 'time1' },
  { id: 'prims.submit.p50', figure: 'Submit → run started, p50 (same minutes as the signal row)', unit: 'ms', ratio: 'time1' },
  {
    id: 'prims.child.overhead',
    figure: 'runChild overhead per child (parent of 10 runChild − 10-step workflow) / 10',
    unit: 'ms',
    ratio: 'time1',
  },
  { id: 'prims.claim.awake', figure: 'Claim statement (batch of 10), 1k runnable, none sleeping, p50', unit: 'ms', ratio: 'time1' },
  {
    id: 'prims.claim.sleeping',
    figure: 'Claim statement (batch of 10), 1k runnable behind 100k sleeping, p50',
    unit: 'ms',
    ratio: 'time1',
  },
  { id: 'prims.idle.qps', figure: 'Idle worker, 10k sleeping tasks: statements per second', unit: 'stmt/s', ratio: 'none' },
  { id: 'ref.insert.c1.end', figure: 'pgbench one-row INSERT, 1 client, again at the end', unit: 'tx/s', ratio: 'tps1' },
  {
    id: 'guard.replayed',
    figure: 'Recorded step replayed by the step runner on a recovered run, guard included (in memory), p50',
    unit: 'ns',
    ratio: 'none',
  },
  { id: 'guard.recorded', figure: "Determinism guard's part of a replayed step, p50", unit: 'ns', ratio: 'none' },
  { id: 'guard.build', figure: 'Determinism guard built for a recovered run, per recorded step, p50', unit: 'ns', ratio: 'none' },
  { id: 'guard.free', figure: 'Determinism guard on a step with nothing recorded left (fresh runs), p50', unit: 'ns', ratio: 'none' },
  {
    id: 'guard.settle',
    figure: 'Wait of a new step started together with a recorded one (Promise.all on a recovered run), p50',
    unit: 'µs',
    ratio: 'none',
  },
  // Flow control (issue 17), after the drift check so the rows above keep their numbers.
  {
    id: 'flow.drain.unlimited',
    figure: 'Drain 0-step, concurrency 10, 1 process, no limits (flow-control baseline, same minutes; median of the rounds)',
    unit: 'tasks/s',
    ratio: 'tps4',
    vsClaim: true,
  },
  {
    id: 'flow.drain.capped',
    figure: 'Drain 0-step, concurrency 10, 1 process, workflow `concurrency: 10`',
    unit: 'tasks/s',
    ratio: 'tps4',
    vsClaim: true,
  },
  {
    id: 'flow.drain.capped100',
    figure: 'Drain 0-step, concurrency 10, 1 process, workflow `concurrency: 100` (never binds)',
    unit: 'tasks/s',
    ratio: 'tps4',
    vsClaim: true,
  },
  {
    id: 'flow.drain.keyed',
    figure: 'Drain 0-step, concurrency 10, 1 process, 1,000 keys at `keyConcurrency: 1`',
    unit: 'tasks/s',
    ratio: 'tps4',
    vsClaim: true,
  },
  {
    id: 'flow.drain.capped.ratio',
    figure: 'Drain with a workflow limit of 10 ÷ the same drain without limits, median of the rounds (target ≥ 0.8)',
    unit: '×',
    ratio: 'none',
  },
  {
    id: 'flow.drain.capped100.ratio',
    figure: 'Drain with a workflow limit of 100 ÷ the same drain without limits, median of the rounds (target ≥ 0.8)',
    unit: '×',
    ratio: 'none',
  },
  {
    id: 'flow.drain.keyed.ratio',
    figure: 'Drain over 1,000 keys ÷ the same drain without limits, median of the rounds (target ≥ 0.8)',
    unit: '×',
    ratio: 'none',
  },
  { id: 'flow.claim.capped.small', figure: 'Limited claim (batch of 10), workflow limit, 1k pending, p50', unit: 'ms', ratio: 'time1' },
  { id: 'flow.claim.capped.large', figure: 'Limited claim (batch of 10), workflow limit, 100k pending, p50', unit: 'ms', ratio: 'time1' },
  {
    id: 'flow.claim.keyed.small',
    figure: 'Limited claim (batch of 10), 1,000 keys at keyConcurrency 1, 1k pending, p50',
    unit: 'ms',
    ratio: 'time1',
  },
  {
    id: 'flow.claim.keyed.large',
    figure: 'Limited claim (batch of 10), 1,000 keys at keyConcurrency 1, 100k pending, p50',
    unit: 'ms',
    ratio: 'time1',
  },
];
