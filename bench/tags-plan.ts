import { Client } from 'pg';
import { clientExecutor, DuraflowDatabase } from '../libs/duraflow/src/persistence/duraflow-database';
import { TaskStore } from '../libs/duraflow/src/persistence/task.store';
import { createBenchDatabase } from './database';

/**
 * The plans of the tag filter at scale (issue 29): TASKS tasks (1,000 tenants, 1,000 tasks each,
 * and an order tag each), analyzed, then the list's page and the count by status with a tag
 * filter, each as the store sends it, its plan printed by auto_explain (with its timings).
 *
 *   node -r ./test/support/swc-register.js bench/tags-plan.ts [tasks]   (default 1,000,000)
 */
async function main(): Promise<void> {
  const tasks = Number(process.argv[2] ?? 1_000_000);
  const database = await createBenchDatabase();
  const explained = new Client({ connectionString: database.url });
  try {
    const started = Date.now();
    await database.client.query(
      `INSERT INTO agent_tasks (workflow_name, input, status, created_at, tags)
       SELECT 'export', '{}', CASE WHEN g % 10 = 0 THEN 'pending' ELSE 'completed' END,
              now() - g * interval '1 millisecond', jsonb_build_object('tenant', 't' || (g % 1000), 'order', g::text)
       FROM generate_series(1, $1::int) AS g`,
      [tasks],
    );
    await database.client.query('ANALYZE agent_tasks');
    console.log(`${tasks} tasks inserted and analyzed in ${Math.round((Date.now() - started) / 1000)} s`);
    await explained.connect();
    const plans: string[] = [];
    explained.on('notice', (notice) => {
      const plan = /plan:\n([\s\S]*)$/.exec(notice.message ?? '')?.[1];
      if (plan) plans.push(plan);
    });
    for (const setting of [
      `LOAD 'auto_explain'`,
      'SET auto_explain.log_min_duration = 0',
      'SET auto_explain.log_analyze = on',
      'SET auto_explain.log_level = notice',
    ]) {
      await explained.query(setting);
    }
    const store = new TaskStore(clientExecutor(explained) as DuraflowDatabase);
    const reads: Array<[string, () => Promise<unknown>]> = [
      ['list, tags { tenant: t7 }, 50 a page', () => store.listTasks({ tags: { tenant: 't7' }, limit: 50, maxBytes: 2 << 20 })],
      [
        'list, tags { tenant: t7, order: 7007 }',
        () => store.listTasks({ tags: { tenant: 't7', order: '7007' }, limit: 50, maxBytes: 2 << 20 }),
      ],
      ['countByStatus, tags { tenant: t7 }', () => store.countTasksByStatus({ tags: { tenant: 't7' } })],
    ];
    for (const [name, read] of reads) {
      plans.length = 0;
      await read();
      console.log(`\n== ${name} (${tasks} tasks)\n${plans.filter((plan) => plan.includes('agent_tasks')).join('\n')}`);
    }
  } finally {
    await explained.end().catch(() => undefined);
    await database.drop();
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
