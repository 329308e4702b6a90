/**
 * Operating at scale (issue 19), opt-in, never in CI: many nodes as separate hosts (network
 * namespaces), the idle cost of nodes, retention at high churn, and a soak. Every part runs on
 * a PostgreSQL of its own (scale-postgres.ts) and prints its figures; nothing is asserted.
 *
 *   node -r ./test/support/swc-register.js bench/scale/run-scale.ts idle [warmupS=45] [windowS=120]
 *   node -r ./test/support/swc-register.js bench/scale/run-scale.ts nodes [delayMs=1] [tasks=3000]   (root: ip netns, tc)
 *   node -r ./test/support/swc-register.js bench/scale/run-scale.ts retention [tasks=1000000] [rate=1000] [keepS=120] [naptimeS=10] [stopAt=ISO time]
 *   node -r ./test/support/swc-register.js bench/scale/run-scale.ts soak [noop=1000000] [tenStep=100000]
 */
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { runDuraflowMigrations } from '@duraflow/nestjs';
import { DuraflowDatabase } from '../../libs/duraflow/src/persistence/duraflow-database';
import { deleteExpiredTasks } from '../../libs/duraflow/src/persistence/lifecycle/delete-expired-tasks';
import { TaskStatus } from '../../libs/duraflow/src/domain/task-status';
import { sleep } from '../../test/support/waiting';
import { stopAllWorkerProcesses } from '../../test/support/worker-process';
import { BenchDuraflowOptions } from '../protocol';
import { BenchWorkerProcess } from '../worker-process';
import { NOOP_WORKFLOW } from '../workflows';
import { DelayProxy } from './delay-proxy';
import { Namespaces } from './netns';
import { ScalePostgres } from './scale-postgres';

const load = () =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');
const log = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)} load ${load()}] ${line}`);

async function createDatabase(server: ScalePostgres, name: string): Promise<string> {
  await server.query(`CREATE DATABASE ${name}`);
  const url = server.url(name);
  await runDuraflowMigrations(url);
  return url;
}

function workerOptions(label: string, extra: Partial<BenchDuraflowOptions> = {}): BenchDuraflowOptions {
  return { workerId: `${label}-${randomBytes(3).toString('hex')}`, ...extra };
}

/** Statements the server ran for `database` (pg_stat_statements, calls), and its commits (pg_stat_database). */
async function serverCounts(server: ScalePostgres, database: string): Promise<{ statements: number; commits: number }> {
  const [row] = await server.query<{ statements: string; commits: string }>(
    `SELECT (SELECT COALESCE(sum(calls), 0) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1) AS statements,
            (SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1) AS commits`,
    [database],
  );
  return { statements: Number(row.statements), commits: Number(row.commits) };
}

function sum(counts: Record<string, number>): number {
  return Object.values(counts).reduce((a, b) => a + b, 0);
}

function delta(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, value] of Object.entries(after)) if (value - (before[key] ?? 0)) out[key] = value - (before[key] ?? 0);
  return out;
}

async function insertTasks(server: ScalePostgres, database: string, count: number, steps: number): Promise<void> {
  for (let done = 0; done < count; done += 50_000) {
    const n = Math.min(50_000, count - done);
    await server.query(
      `INSERT INTO agent_tasks (workflow_name, input) SELECT $1, jsonb_build_object('steps', $2::int) FROM generate_series(1, $3::int)`,
      [NOOP_WORKFLOW, steps, n],
      database,
    );
  }
  await server.query('ANALYZE agent_tasks', [], database);
}

async function completedCount(server: ScalePostgres, database: string): Promise<number> {
  const [row] = await server.query<{ n: number }>(`SELECT count(*)::int AS n FROM agent_tasks WHERE status = 'completed'`, [], database);
  return row.n;
}

// ------------------------------------------------------------------ idle

async function idle(warmupS: number, windowS: number): Promise<void> {
  const server = await ScalePostgres.start();
  try {
    const groups: Array<{ database: string; nodes: BenchWorkerProcess[] }> = [];
    for (const size of [1, 10]) {
      const database = `idle${size}`;
      const url = await createDatabase(server, database);
      const nodes = Array.from({ length: size }, (_, i) =>
        BenchWorkerProcess.start({ databaseUrl: url, label: `idle${size}-${i + 1}`, duraflow: workerOptions(`idle${size}-${i + 1}`) }),
      );
      groups.push({ database, nodes });
    }
    await Promise.all(groups.flatMap((group) => group.nodes.map((node) => node.ready)));
    log(`11 idle nodes at the defaults (1 on idle1, 10 on idle10); warm-up ${warmupS} s so the poll backs off to its ceiling`);
    await sleep(warmupS * 1000);
    const before = await Promise.all(
      groups.map(async (group) => ({
        server: await serverCounts(server, group.database),
        nodes: await Promise.all(group.nodes.map((node) => node.queryCounts())),
      })),
    );
    await sleep(windowS * 1000);
    for (const [index, group] of groups.entries()) {
      const after = await serverCounts(server, group.database);
      const nodeCounts = await Promise.all(group.nodes.map((node) => node.queryCounts()));
      const perNode = nodeCounts.map((counts, i) => (sum(counts) - sum(before[index].nodes[i])) / (windowS / 60));
      const byStatement = delta(
        before[index].nodes.reduce((acc, counts) => mergeCounts(acc, counts), {}),
        nodeCounts.reduce((acc, counts) => mergeCounts(acc, counts), {}),
      );
      log(
        `${group.database}: ${group.nodes.length} idle node(s) over ${windowS} s: server ran ${((after.statements - before[index].server.statements) / (windowS / 60)).toFixed(1)} statements/min ` +
          `(${((after.commits - before[index].server.commits) / (windowS / 60)).toFixed(1)} transactions/min, both including autovacuum's and this bench's reads), ` +
          `per node (client side) ${perNode.map((v) => v.toFixed(1)).join(', ')} /min; by statement over the window: ${JSON.stringify(byStatement)}`,
      );
    }
    // A submit on the backed-off idle nodes: its NOTIFY wakes them.
    const latencies: number[] = [];
    for (let i = 0; i < 10; i++) {
      const t0 = performance.now();
      const [task] = await server.query<{ id: string }>(
        `WITH t AS (INSERT INTO agent_tasks (workflow_name, input) VALUES ($1, '{"steps":1}') RETURNING id)
         SELECT id, pg_notify('duraflow_task_submitted', $1) FROM t`,
        [NOOP_WORKFLOW],
        'idle10',
      );
      for (;;) {
        const [row] = await server.query<{ status: string }>(`SELECT status FROM agent_tasks WHERE id = $1`, [task.id], 'idle10');
        if (row.status === 'completed') break;
        await sleep(2);
      }
      latencies.push(performance.now() - t0);
      await sleep(5_000);
    }
    latencies.sort((a, b) => a - b);
    log(
      `submit -> completed on 10 backed-off idle nodes (1-step task, polled every 2 ms on fresh connections, 5 s apart): ` +
        `median ${latencies[5].toFixed(1)} ms, max ${latencies[9].toFixed(1)} ms`,
    );
  } finally {
    await stopAllWorkerProcesses();
    await server.stop();
  }
}

function mergeCounts(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  const out = { ...a };
  for (const [key, value] of Object.entries(b)) out[key] = (out[key] ?? 0) + value;
  return out;
}

// ------------------------------------------------------------------ nodes

async function nodes(delayMs: number, tasks: number): Promise<void> {
  const server = await ScalePostgres.start();
  const spaces = new Namespaces(delayMs);
  try {
    const namespaces = [1, 2, 3, 4].map((n) => spaces.create(n));
    // Without sch_netem the delay is a proxy on the root side of each veth, on the server's port.
    const proxies = spaces.netem ? [] : await Promise.all(namespaces.map(({ dbHost }) => DelayProxy.start(dbHost, server.port, delayMs)));
    process.once('exit', () => proxies.forEach((proxy) => proxy.close()));
    const hosts = namespaces.map(({ name, dbHost }, i) => ({ name, dbHost, dbPort: proxies[i]?.port ?? server.port }));
    log(
      `4 namespaces, veth to the root namespace, ${delayMs} ms each way ` +
        (spaces.netem ? 'by tc netem' : 'by a delay proxy on the root side (this kernel has no sch_netem)'),
    );
    for (const k of [1, 2, 4]) {
      for (const steps of [0, 10]) {
        const database = `nodes${k}s${steps}`;
        await createDatabase(server, database);
        const count = steps ? Math.round(tasks / 5) : tasks;
        await insertTasks(server, database, count, steps);
        const workers = hosts.slice(0, k).map(({ name, dbHost, dbPort }, i) =>
          BenchWorkerProcess.start({
            databaseUrl: server.url(database, dbHost, dbPort),
            label: `${database}-${i + 1}`,
            launcher: Namespaces.launcher(name),
            duraflow: workerOptions(`${database}-${i + 1}`, { worker: { enabled: false } }),
          }),
        );
        await Promise.all(workers.map((worker) => worker.ready));
        const countsBefore = await Promise.all(workers.map((worker) => worker.queryCounts()));
        const serverBefore = await serverCounts(server, database);
        const t0 = performance.now();
        await Promise.all(workers.map((worker) => worker.startWorker()));
        while ((await completedCount(server, database)) < count) await sleep(50);
        const seconds = (performance.now() - t0) / 1000;
        const countsAfter = await Promise.all(workers.map((worker) => worker.queryCounts()));
        const serverAfter = await serverCounts(server, database);
        const perNode = countsAfter.map((after, i) => (sum(after) - sum(countsBefore[i])) / seconds);
        const reaps = countsAfter.map((after, i) => (after['duraflow_reap'] ?? 0) - (countsBefore[i]['duraflow_reap'] ?? 0));
        const byStatement = delta(
          countsBefore.reduce((acc, c) => mergeCounts(acc, c), {}),
          countsAfter.reduce((acc, c) => mergeCounts(acc, c), {}),
        );
        log(
          `${k} node(s), ${count} tasks of ${steps} steps, concurrency 10 each: ${(count / seconds).toFixed(0)} tasks/s` +
            (steps ? `, ${((count * steps) / seconds).toFixed(0)} steps/s` : '') +
            `; busy statements/s per node ${perNode.map((v) => v.toFixed(0)).join(', ')}; server statements/s ${((serverAfter.statements - serverBefore.statements) / seconds).toFixed(0)}` +
            `; statements per task ${((serverAfter.statements - serverBefore.statements) / count).toFixed(2)}; reap passes per node ${reaps.join(', ')}; by statement ${JSON.stringify(byStatement)}`,
        );
        await Promise.all(workers.map((worker) => worker.stop()));
      }
    }
    // Per-step overhead through the link: one task at a time, 10 steps vs 0 steps, on one node.
    const database = 'perstep';
    await createDatabase(server, database);
    const [{ name, dbHost, dbPort }] = hosts;
    const worker = BenchWorkerProcess.start({
      databaseUrl: server.url(database, dbHost, dbPort),
      label: 'perstep',
      launcher: Namespaces.launcher(name),
      duraflow: workerOptions('perstep'),
    });
    await worker.ready;
    const timeOne = async (steps: number): Promise<number> => {
      const [task] = await server.query<{ id: string }>(
        `WITH t AS (INSERT INTO agent_tasks (workflow_name, input) VALUES ($1, jsonb_build_object('steps', $2::int)) RETURNING id)
         SELECT id, pg_notify('duraflow_task_submitted', $1) FROM t`,
        [NOOP_WORKFLOW, steps],
        database,
      );
      const [times] = await (async () => {
        for (;;) {
          const rows = await server.query<{ ms: number | null }>(
            `SELECT extract(epoch FROM completed_at - started_at) * 1000 AS ms FROM agent_tasks WHERE id = $1 AND status = 'completed'`,
            [task.id],
            database,
          );
          if (rows.length) return rows;
          await sleep(5);
        }
      })();
      return Number(times.ms);
    };
    for (let i = 0; i < 3; i++) await timeOne(10);
    const ten: number[] = [];
    const zero: number[] = [];
    for (let i = 0; i < 15; i++) {
      ten.push(await timeOne(10));
      zero.push(await timeOne(0));
    }
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
    log(
      `per-step overhead through the ${delayMs} ms link (started_at -> completed_at on the server clock, one task at a time): ` +
        `10 steps ${median(ten).toFixed(1)} ms, 0 steps ${median(zero).toFixed(1)} ms -> ${((median(ten) - median(zero)) / 10).toFixed(2)} ms per step`,
    );
    proxies.forEach((proxy) => proxy.close());
  } finally {
    await stopAllWorkerProcesses();
    spaces.removeAll();
    await server.stop();
  }
}

// ------------------------------------------------------------------ retention

/** The per-table settings docs/operations.md gives for high churn. */
const TUNED_AUTOVACUUM =
  'autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_insert_scale_factor = 0.01, ' +
  'autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0';

interface TableFigures {
  live: number;
  dead: number;
  heapBytes: number;
  indexBytes: number;
  /** Heap, indexes and toast. */
  totalBytes: number;
  autovacuums: number;
}

async function tableFigures(server: ScalePostgres, database: string): Promise<Record<'agent_tasks' | 'step_runs', TableFigures>> {
  const rows = await server.query<Record<string, string>>(
    `SELECT relname, n_live_tup AS live, n_dead_tup AS dead, pg_relation_size(relid) AS heap, pg_indexes_size(relid) AS indexes,
            pg_total_relation_size(relid) AS total, autovacuum_count AS autovacuums
       FROM pg_stat_user_tables WHERE relname IN ('agent_tasks', 'step_runs')`,
    [],
    database,
  );
  const figures = (name: string): TableFigures => {
    const row = rows.find((r) => r.relname === name)!;
    return {
      live: Number(row.live),
      dead: Number(row.dead),
      heapBytes: Number(row.heap),
      indexBytes: Number(row.indexes),
      totalBytes: Number(row.total),
      autovacuums: Number(row.autovacuums),
    };
  };
  return { agent_tasks: figures('agent_tasks'), step_runs: figures('step_runs') };
}

const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

/**
 * One variant of the churn: `total` tasks through their life as the engine writes it (inserted,
 * claimed, 2 step runs checkpointed, completed), `rate` per second on a fixed schedule (a batch
 * every second), and retention removing what finished more than `keepS` ago (so the tables hold
 * about `rate × keepS` tasks of history, as a retention of days holds a history). Figures sampled
 * every 10 s (peaks) and printed at every `checkpoint` tasks.
 */
async function churn(
  variant: string,
  server: ScalePostgres,
  database: string,
  settings: { total: number; rate: number; keepS: number; checkpoint: number; stopAt: number },
): Promise<void> {
  const url = server.url(database);
  const { Pool } = await import('pg');
  const pool = new Pool({ connectionString: url, max: 2 });
  const db = {
    query: async (text: string, values: unknown[] = []) => {
      const result = await pool.query(text, values);
      return { rows: result.rows, rowCount: result.rowCount ?? 0 };
    },
  } as unknown as DuraflowDatabase;
  const batch = settings.rate;
  const t0 = performance.now();
  let removed = 0;
  let done = 0;
  const peak = { tasksDead: 0, stepsDead: 0, totalBytes: 0 };
  const sample = async () => {
    const figures = await tableFigures(server, database);
    const { agent_tasks: tasks, step_runs: steps } = figures;
    peak.tasksDead = Math.max(peak.tasksDead, tasks.dead);
    peak.stepsDead = Math.max(peak.stepsDead, steps.dead);
    peak.totalBytes = Math.max(peak.totalBytes, tasks.totalBytes + steps.totalBytes);
    return figures;
  };
  const report = async (label: string) => {
    const { agent_tasks: tasks, step_runs: steps } = await sample();
    const seconds = (performance.now() - t0) / 1000;
    log(
      `${variant} ${label} ${done} tasks in ${seconds.toFixed(0)} s (${(done / seconds).toFixed(0)} tasks/s), removed ${removed}: ` +
        `agent_tasks live ${tasks.live} dead ${tasks.dead} (peak ${peak.tasksDead}) heap ${mb(tasks.heapBytes)} MB indexes ${mb(tasks.indexBytes)} MB autovacuums ${tasks.autovacuums}; ` +
        `step_runs live ${steps.live} dead ${steps.dead} (peak ${peak.stepsDead}) heap ${mb(steps.heapBytes)} MB indexes ${mb(steps.indexBytes)} MB autovacuums ${steps.autovacuums}; ` +
        `both tables total ${mb(tasks.totalBytes + steps.totalBytes)} MB (peak ${mb(peak.totalBytes)} MB)`,
    );
  };
  try {
    while (done < settings.total && Date.now() < settings.stopAt) {
      // The schedule, not the speed of this variant, says when the next batch starts.
      const due = t0 + (done / settings.rate) * 1000;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const n = Math.min(batch, settings.total - done);
      await pool.query(
        `INSERT INTO agent_tasks (workflow_name, input, status) SELECT 'churn', '{}', 'pending' FROM generate_series(1, $1::int)`,
        [n],
      );
      await pool.query(
        `UPDATE agent_tasks SET status = 'running', worker_id = 'w', claim_token = gen_random_uuid(), started_at = now(), heartbeat_at = now() WHERE status = 'pending'`,
      );
      await pool.query(
        `INSERT INTO step_runs (task_id, step_key, status, output, completed_at) SELECT id, k, 'completed', '{"ok":true}', now()
           FROM agent_tasks, (VALUES ('s1'), ('s2')) AS s(k) WHERE status = 'running'`,
      );
      await pool.query(
        `UPDATE agent_tasks SET status = 'completed', output = '{}', completed_at = now(), updated_at = now() WHERE status = 'running'`,
      );
      for (;;) {
        const counts = await deleteExpiredTasks(db, [{ status: TaskStatus.COMPLETED, keepMs: settings.keepS * 1000 }], 500);
        const gone = counts.get(TaskStatus.COMPLETED) ?? 0;
        removed += gone;
        if (gone < 500) break;
      }
      const before = done;
      done += n;
      if (Math.floor(done / (settings.rate * 10)) > Math.floor(before / (settings.rate * 10))) await sample();
      if (Math.floor(done / settings.checkpoint) > Math.floor(before / settings.checkpoint)) await report('checkpoint');
    }
    if (done % settings.checkpoint !== 0) await report(done < settings.total ? 'stopped at the time limit' : 'end');
  } finally {
    await pool.end();
  }
}

/**
 * Both variants at once, each on a server of its own, on the same schedule: the same machine
 * load, the same number of autovacuum naptimes per task; only the per-table settings differ.
 */
async function retention(total: number, rate: number, keepS: number, naptimeS: number, stopAt: number): Promise<void> {
  const variants = [
    { name: 'default', tuned: false },
    { name: 'per-table', tuned: true },
  ];
  const servers = await Promise.all(variants.map(() => ScalePostgres.start({ autovacuum_naptime: `${naptimeS}s` })));
  try {
    log(
      `retention churn: ${total} tasks x 2 steps, ${rate} tasks/s on a fixed schedule, retention keeps ${keepS} s (about ` +
        `${rate * keepS} tasks), autovacuum_naptime ${naptimeS} s; both variants at once, a server each; per-table settings: ${TUNED_AUTOVACUUM}`,
    );
    await Promise.all(
      variants.map(async ({ name, tuned }, index) => {
        const database = `churn_${tuned ? 'tuned' : 'default'}`;
        await createDatabase(servers[index], database);
        if (tuned) {
          for (const table of ['agent_tasks', 'step_runs']) {
            const settings =
              table === 'step_runs' ? TUNED_AUTOVACUUM.replace(', autovacuum_analyze_scale_factor = 0.02', '') : TUNED_AUTOVACUUM;
            await servers[index].query(`ALTER TABLE ${table} SET (${settings})`, [], database);
          }
        }
        await churn(name, servers[index], database, { total, rate, keepS, checkpoint: 250_000, stopAt });
      }),
    );
  } finally {
    await Promise.all(servers.map((server) => server.stop()));
  }
}

// ------------------------------------------------------------------ soak

async function soak(noop: number, tenStep: number): Promise<void> {
  const server = await ScalePostgres.start();
  try {
    const database = 'soak';
    const url = await createDatabase(server, database);
    const workers = [1, 2].map((i) =>
      BenchWorkerProcess.start({
        databaseUrl: url,
        label: `soak-${i}`,
        duraflow: workerOptions(`soak-${i}`, { worker: { enabled: false } }),
      }),
    );
    await Promise.all(workers.map((worker) => worker.ready));
    for (const [count, steps] of [
      [noop, 0],
      [tenStep, 10],
    ] as const) {
      await insertTasks(server, database, count, steps);
      const base = await completedCount(server, database);
      await Promise.all(workers.map((worker) => worker.startWorker()));
      const t0 = performance.now();
      let last = { at: t0, done: 0 };
      for (;;) {
        await sleep(10_000);
        const done = (await completedCount(server, database)) - base;
        const now = performance.now();
        const memory = await Promise.all(workers.map((worker) => worker.memory()));
        const [sizes] = await server.query<Record<string, string>>(
          `SELECT pg_size_pretty(pg_relation_size('agent_tasks')) AS tasks, pg_size_pretty(pg_indexes_size('agent_tasks')) AS task_indexes,
                  pg_size_pretty(pg_relation_size('step_runs')) AS steps, pg_size_pretty(pg_indexes_size('step_runs')) AS step_indexes,
                  (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'agent_tasks') AS tasks_dead`,
          [],
          database,
        );
        log(
          `soak ${steps}-step: ${done}/${count} done, ${(((done - last.done) * 1000) / (now - last.at)).toFixed(0)} tasks/s over the last 10 s; ` +
            `RSS ${memory.map((m) => (m.rss / 2 ** 20).toFixed(0)).join('/')} MB, heap ${memory.map((m) => (m.heapUsed / 2 ** 20).toFixed(0)).join('/')} MB; ${JSON.stringify(sizes)}`,
        );
        last = { at: now, done };
        if (done >= count) break;
      }
      log(`soak ${steps}-step: ${count} tasks in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
      await Promise.all(workers.map((worker) => worker.stopWorker()));
    }
    await insertTasks(server, database, 1000, 0);
    const plan = await server.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN (ANALYZE, BUFFERS) SELECT id FROM agent_tasks WHERE status = 'pending' ORDER BY priority DESC, created_at, id LIMIT 10 FOR UPDATE SKIP LOCKED`,
      [],
      database,
    );
    log(`claim plan at the end (the claim's pending scan):\n${plan.map((row) => row['QUERY PLAN']).join('\n')}`);
  } finally {
    await stopAllWorkerProcesses();
    await server.stop();
  }
}

async function main(): Promise<void> {
  const [what, a, b] = process.argv.slice(2);
  log(`scale bench: ${what}`);
  if (what === 'idle') await idle(Number(a ?? 45), Number(b ?? 120));
  else if (what === 'nodes') await nodes(Number(a ?? 1), Number(b ?? 3000));
  else if (what === 'retention') {
    const [rate, keepS, naptimeS, stopAt] = process.argv.slice(4);
    await retention(
      Number(a ?? 1_000_000),
      Number(rate ?? 1000),
      Number(keepS ?? 120),
      Number(naptimeS ?? 10),
      stopAt ? Date.parse(stopAt) : Number.POSITIVE_INFINITY,
    );
  } else if (what === 'soak') await soak(Number(a ?? 1_000_000), Number(b ?? 100_000));
  else throw new Error('usage: run-scale.ts idle|nodes|retention|soak [...]');
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
