import { BenchContext, rawSection } from '../context';
import { sleep } from '../../test/support/waiting';
import { progress } from '../stats';
import { bootWorkers, describeCpu, drainOnce, DrainResult } from './drain';

const MB = 1024 * 1024;

/**
 * One worker process (concurrency 10): RSS after boot, then sampled every 250 ms while it
 * drains `rssTasks` 0-step tasks. V8 lets its heap fill with garbage up to a limit before a
 * full collection, so a single reading swings by tens of MB; flat means the peak over the
 * second half of the drain is no higher than over the first.
 */
export async function memoryScenario(ctx: BenchContext): Promise<void> {
  const tasks = ctx.sizes.rssTasks;
  const [worker] = await bootWorkers(ctx, 1, 10, true);
  try {
    const before = await worker.memory();
    progress(`RSS run: draining ${tasks} 0-step tasks in one worker process`);
    const startCompleted = (await worker.stats()).completed;
    const samples: Array<{ completed: number; rss: number; heapUsed: number }> = [];
    let draining = true;
    const sampler = (async () => {
      while (draining) {
        const [stats, memory] = await Promise.all([worker.stats(), worker.memory()]);
        samples.push({ completed: stats.completed - startCompleted, rss: memory.rss, heapUsed: memory.heapUsed });
        await sleep(250);
      }
    })();
    let drain: DrainResult;
    try {
      drain = await drainOnce(ctx, [worker], 0, tasks);
    } finally {
      draining = false;
      await sampler;
    }
    const after = await worker.memory();
    samples.push({ completed: tasks, rss: after.rss, heapUsed: after.heapUsed });
    const table = await ctx.db.client.query<{ n_dead_tup: string; autovacuum_count: string; claim_index_kb: string }>(
      `SELECT n_dead_tup, autovacuum_count, pg_relation_size('idx_agent_tasks_claim') / 1024 AS claim_index_kb
       FROM pg_stat_user_tables WHERE relname = 'agent_tasks'`,
    );
    // The claim walks the partial index's head; dead entries there cost every claim until vacuum.
    const vacuum = table.rows[0];
    const afterGc = await worker.memory(true);
    Object.assign(rawSection(ctx, 'memory'), { tasks, before, samples, after, afterGc, drain, agentTasks: vacuum });
    const rates = `first tenth ${Math.round(drain.firstTenthPerSecond)}/s, last tenth ${Math.round(drain.lastTenthPerSecond)}/s`;
    const bloat = `agent_tasks after it: ${vacuum.n_dead_tup} dead tuples, ${vacuum.autovacuum_count} autovacuum(s), idx_agent_tasks_claim ${vacuum.claim_index_kb} kB`;
    ctx.results.set(
      'rss.drain.tasks',
      drain.tasksPerSecond,
      `${tasks} tasks in ${drain.seconds.toFixed(1)} s (${rates}); ${describeCpu(drain)}; ${bloat}`,
    );
    ctx.results.set('rss.before', before.rss / MB, `booted, worker not started; heap used ${(before.heapUsed / MB).toFixed(1)} MB`);
    const firstHalf = samples.filter((sample) => sample.completed < tasks / 2);
    const secondHalf = samples.filter((sample) => sample.completed >= tasks / 2);
    const peak = (half: typeof samples) => half.reduce((max, sample) => Math.max(max, sample.rss), 0) / MB;
    const heapPeak = (half: typeof samples) => half.reduce((max, sample) => Math.max(max, sample.heapUsed), 0) / MB;
    ctx.results.set(
      'rss.first.half',
      peak(firstHalf),
      `peak of ${firstHalf.length} samples over the first ${tasks / 2} tasks; heap used up to ${heapPeak(firstHalf).toFixed(1)} MB`,
    );
    const growth = peak(secondHalf) - peak(firstHalf);
    ctx.results.set(
      'rss.second.half',
      peak(secondHalf),
      `peak of ${secondHalf.length} samples over the last ${tasks / 2} tasks: ${growth >= 0 ? '+' : ''}${growth.toFixed(1)} MB on the first half; heap used up to ${heapPeak(secondHalf).toFixed(1)} MB; at the end ${(after.rss / MB).toFixed(0)} MB`,
    );
    ctx.results.set('rss.after.gc', afterGc.rss / MB, `global.gc() (--expose-gc); heap used ${(afterGc.heapUsed / MB).toFixed(1)} MB`);
  } catch (error) {
    process.stderr.write(`${worker.outputTail(40)}\n`);
    throw error;
  } finally {
    await worker.stop();
    await ctx.db.truncate();
  }
}
