import { BenchContext, rawSection } from '../context';
import { progress } from '../stats';
import { bootWorkers, describeCpu, drainOnce } from './drain';

const MB = 1024 * 1024;

/** One worker process (concurrency 10), RSS right before and right after draining `rssTasks` 0-step tasks. */
export async function memoryScenario(ctx: BenchContext): Promise<void> {
  const tasks = ctx.sizes.rssTasks;
  const [worker] = await bootWorkers(ctx, 1, 10, true);
  try {
    const before = await worker.memory();
    progress(`RSS run: draining ${tasks} 0-step tasks in one worker process`);
    const drain = await drainOnce(ctx, [worker], 0, tasks);
    const after = await worker.memory();
    const table = await ctx.db.client.query<{ n_dead_tup: string; autovacuum_count: string; claim_index_kb: string }>(
      `SELECT n_dead_tup, autovacuum_count, pg_relation_size('idx_agent_tasks_claim') / 1024 AS claim_index_kb
       FROM pg_stat_user_tables WHERE relname = 'agent_tasks'`,
    );
    // The claim walks the partial index's head; dead entries there cost every claim until vacuum.
    const vacuum = table.rows[0];
    const afterGc = await worker.memory(true);
    Object.assign(rawSection(ctx, 'memory'), { tasks, before, after, afterGc, drain, agentTasks: vacuum });
    const rates = `first tenth ${Math.round(drain.firstTenthPerSecond)}/s, last tenth ${Math.round(drain.lastTenthPerSecond)}/s`;
    const bloat = `agent_tasks after it: ${vacuum.n_dead_tup} dead tuples, ${vacuum.autovacuum_count} autovacuum(s), idx_agent_tasks_claim ${vacuum.claim_index_kb} kB`;
    ctx.results.set('rss.drain.tasks', drain.tasksPerSecond, `${tasks} tasks in ${drain.seconds.toFixed(1)} s (${rates}); ${describeCpu(drain)}; ${bloat}`);
    ctx.results.set('rss.before', before.rss / MB, `booted, worker not started; heap used ${(before.heapUsed / MB).toFixed(1)} MB`);
    ctx.results.set('rss.after', after.rss / MB, `after ${tasks} tasks; heap used ${(after.heapUsed / MB).toFixed(1)} MB`);
    ctx.results.set('rss.after.gc', afterGc.rss / MB, `global.gc() (--expose-gc); heap used ${(afterGc.heapUsed / MB).toFixed(1)} MB`);
  } catch (error) {
    process.stderr.write(`${worker.tail()}\n`);
    throw error;
  } finally {
    await worker.stop();
    await ctx.db.truncate();
  }
}
