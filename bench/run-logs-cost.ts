/**
 * What `ctx.log` costs per step (issue 29 point 2): the same runs on one in-process worker with
 * no-op steps, without and with one `ctx.log.info` line per step (inside the step, with
 * metadata; the run writes its pending lines with one statement just before each checkpoint).
 * Not part of `npm run bench`:
 *
 *   node -r ./test/support/swc-register.js bench/run-logs-cost.ts [--pairs 31]
 *
 * Per step: p50 (and p90) over `pairs` of (10-step run − 3-step run) / 7, each run timed from the
 * first to the last line of its run function (as row 32 of the main bench), after a 2,000-step
 * warm-up run of each. The two are measured in turn, pair by pair, so a change of the machine's
 * load hits both alike. Prints one Markdown table; figures in bench/README.md, "Run logs".
 */
import 'reflect-metadata';
import { performance } from 'node:perf_hooks';
import { workflow, WorkflowService } from '@duraflow/nestjs';
import { TestBed } from '../test/support/test-bed';
import { median, progress, quantile } from './stats';

const durations = new Map<string, number>();

/** A workflow of `steps` no-op steps, timed from the first to the last line of its run function. */
function stepsWorkflow(name: string, log: boolean) {
  return workflow<{ steps: number }>(name, async (ctx) => {
    const started = performance.now();
    for (let i = 0; i < ctx.input.steps; i++) {
      await ctx.step.run(`s${i}`, () => {
        if (log) ctx.log.info('step ran', { i });
        return i;
      });
    }
    durations.set(ctx.runId, performance.now() - started);
  });
}

async function main(): Promise<void> {
  const pairsFlag = process.argv.indexOf('--pairs');
  const pairs = pairsFlag > 0 ? Number(process.argv[pairsFlag + 1]) : 31;
  const bed = new TestBed();
  await bed.setUp({ prefix: 'duraflow_bench' });
  try {
    const app = await bed.start({
      duraflow: {
        workflows: [stepsWorkflow('log-off', false), stepsWorkflow('log-on', true)],
        logs: { maxPerTask: 10_000 },
        worker: { pollIntervalMs: 50 },
        reaper: { enabled: false },
      },
    });
    const workflows = app.get(WorkflowService);
    const run = async (name: string, steps: number) => {
      const task = await workflows.submit(name, { steps });
      await workflows.waitFor(task.id, { timeoutMs: 120_000 });
      return durations.get(task.id)!;
    };
    const configurations = [
      { name: 'no line', workflow: 'log-off', perStep: [] as number[] },
      { name: 'one ctx.log.info line per step', workflow: 'log-on', perStep: [] as number[] },
    ];
    progress('warm-up: a 2,000-step run of each');
    for (const config of configurations) await run(config.workflow, 2_000);
    for (let i = 0; i < pairs; i++) {
      if (i % 10 === 0) progress(`pair ${i + 1}/${pairs}`);
      for (const config of configurations) {
        const ten = await run(config.workflow, 10);
        const three = await run(config.workflow, 3);
        config.perStep.push((ten - three) / 7);
      }
    }
    const fmt = (ms: number) => ms.toFixed(3);
    console.log(`| steps | per step, end to end: p50 (p90) of ${pairs} |`);
    console.log('|---|---|');
    for (const config of configurations) {
      console.log(`| ${config.name} | ${fmt(median(config.perStep))} ms (${fmt(quantile(config.perStep, 0.9))} ms) |`);
    }
    const [off, on] = configurations.map((config) => median(config.perStep));
    console.log(`\none line per step adds ${fmt(on - off)} ms per step (p50 difference), ratio ${(on / off).toFixed(2)}`);
  } finally {
    await bed.tearDown();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
