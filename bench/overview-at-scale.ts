import { clientExecutor } from '../libs/duraflow/src/persistence/duraflow-database';
import { readTaskOverview, rollUpTaskStats } from '../libs/duraflow/src/persistence/sql/task-stats';
import { DashboardLinks } from '../libs/duraflow/src/dashboard/dashboard-links';
import { resolveDashboardOptions } from '../libs/duraflow/src/dashboard/dashboard.options';
import { overviewPage } from '../libs/duraflow/src/dashboard/views/overview.page';
import { OverviewWindow } from '../libs/duraflow/src/domain/task-overview';
import { loadavg } from 'node:os';
import { createBenchDatabase } from './database';

/**
 * The dashboard's overview at scale (issue 31): TASKS tasks of 10 workflows spread over the last
 * 8 days (80 % completed, 10 % failed, 5 % rolled back, 4 % cancelled, 1 % pending: a backlog of
 * 10,000 runnable tasks at 1M), analyzed; then the overview's server time per window (its reads
 * and the page's rendering, the median of RUNS), first with no rollup (every row of the window read from agent_tasks), then after the
 * reaper leader's hourly rollup has caught up (its own time printed too).
 *
 *   node -r ./test/support/swc-register.js bench/overview-at-scale.ts [tasks]   (default 1,000,000)
 */
const RUNS = 7;
const WINDOWS: OverviewWindow[] = ['hour', 'day', 'week'];

async function main(): Promise<void> {
  const tasks = Number(process.argv[2] ?? 1_000_000);
  const database = await createBenchDatabase();
  const executor = clientExecutor(database.client);
  try {
    let started = Date.now();
    await database.client.query(
      `INSERT INTO agent_tasks (workflow_name, input, status, created_at, started_at, completed_at)
       SELECT 'workflow-' || (g % 10), '{}', s.status, c.at, CASE WHEN s.status <> 'pending' THEN c.at END,
              CASE WHEN s.status <> 'pending' THEN c.at + (50 + (g % 997) * 7) * interval '1 millisecond' END
       FROM generate_series(1, $1::int) AS g
       CROSS JOIN LATERAL (SELECT now() - (g::float8 / $1) * interval '8 days' AS at) AS c
       CROSS JOIN LATERAL (SELECT CASE WHEN g % 100 < 80 THEN 'completed' WHEN g % 100 < 90 THEN 'failed'
         WHEN g % 100 < 95 THEN 'rolled_back' WHEN g % 100 < 99 THEN 'cancelled' ELSE 'pending' END AS status) AS s`,
      [tasks],
    );
    await database.client.query('VACUUM ANALYZE agent_tasks');
    console.log(`${tasks} tasks inserted, vacuumed and analyzed in ${Math.round((Date.now() - started) / 1000)} s`);

    const context = { links: new DashboardLinks('/duraflow'), options: resolveDashboardOptions({}), now: new Date() };
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
    const time = async (window: OverviewWindow, runs: number) => {
      const reads: number[] = [];
      const renders: number[] = [];
      let bytes = 0;
      for (let run = 0; run < runs; run++) {
        const start = performance.now();
        const overview = await readTaskOverview(executor, window);
        const read = performance.now();
        bytes = overviewPage({ ...context, now: new Date() }, overview).value.length;
        reads.push(read - start);
        renders.push(performance.now() - read);
      }
      return { read: median(reads), render: median(renders), bytes };
    };

    const before = new Map<OverviewWindow, number>();
    for (const window of WINDOWS) before.set(window, (await time(window, 1)).read);
    started = Date.now();
    let statements = 0;
    for (let more = true; more; statements++) {
      await database.client.query('BEGIN');
      more = (await rollUpTaskStats(executor)).more;
      await database.client.query('COMMIT');
    }
    const rollupMs = Date.now() - started;
    console.log(
      `\nOverview at ${tasks} tasks, median of ${RUNS}; load average ${loadavg()
        .map((load) => load.toFixed(1))
        .join(' ')}:`,
    );
    console.log('| window | read, no rollup (1 run, ms) | read, with the rollup (ms) | render (ms) | page size |');
    for (const window of WINDOWS) {
      const after = await time(window, RUNS);
      console.log(
        `| ${window} | ${before.get(window)!.toFixed(0)} | ${after.read.toFixed(1)} | ${after.render.toFixed(1)} | ${Math.round(after.bytes / 1024)} KiB |`,
      );
    }
    const { rows } = await database.client.query(`SELECT count(*)::int AS n FROM duraflow_task_rollup`);
    console.log(`\nFirst rollup of 8 days: ${rollupMs} ms in ${statements} statements, ${rows[0].n} rollup rows`);
  } finally {
    await database.drop();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
