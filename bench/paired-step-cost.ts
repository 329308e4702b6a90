/**
 * What one step option or one call inside a step costs per step: the same runs on one
 * in-process worker with no-op steps, without and with it. Shared by bench/record-start-cost.ts
 * and bench/run-logs-cost.ts (not part of `npm run bench`).
 *
 * Per step: p50 (and p90) over `--pairs` (default 31) of (10-step run − 3-step run) / 7, each run
 * timed from the first to the last line of its run function (as row 32 of the main bench), after
 * a 2,000-step warm-up run of each. The two are measured in turn, pair by pair, so a change of
 * the machine's load hits both alike. Prints one Markdown table and the p50 difference.
 */
import 'reflect-metadata';
import { performance } from 'node:perf_hooks';
import { DuraflowModuleOptions, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { TestBed } from '../test/support/test-bed';
import { median, progress, quantile } from './stats';

/** One step of the measured workflow: `with` tells whether this run is the one with the thing measured. */
export type MeasuredStep = (ctx: WorkflowContext<{ steps: number }>, key: string, i: number, withIt: boolean) => Promise<unknown>;

export interface PairedStepCost {
  /** The two rows of the table: without, then with. */
  labels: [string, string];
  /** What the last line says is added per step. */
  what: string;
  step: MeasuredStep;
  /** More module options (the workflows, worker and reaper are set here). */
  options?: Partial<DuraflowModuleOptions>;
  /** Called before each run with whether it is the one with the thing measured (a module-wide switch, e.g. a codec's). */
  beforeRun?: (withIt: boolean) => void;
}

export function runPairedStepCost(measure: PairedStepCost): void {
  main(measure).catch((error) => {
    console.error(error);
    process.exit(1);
  });
}

async function main(measure: PairedStepCost): Promise<void> {
  const durations = new Map<string, number>();
  const stepsWorkflow = (name: string, withIt: boolean) =>
    workflow<{ steps: number }>(name, async (ctx) => {
      const started = performance.now();
      for (let i = 0; i < ctx.input.steps; i++) await measure.step(ctx, `s${i}`, i, withIt);
      durations.set(ctx.runId, performance.now() - started);
    });
  const pairsFlag = process.argv.indexOf('--pairs');
  const pairs = pairsFlag > 0 ? Number(process.argv[pairsFlag + 1]) : 31;
  const bed = new TestBed();
  await bed.setUp({ prefix: 'duraflow_bench' });
  try {
    const app = await bed.start({
      duraflow: {
        ...measure.options,
        workflows: [stepsWorkflow('cost-off', false), stepsWorkflow('cost-on', true)],
        worker: { pollIntervalMs: 50 },
        reaper: { enabled: false },
      },
    });
    const workflows = app.get(WorkflowService);
    const run = async (name: string, steps: number) => {
      measure.beforeRun?.(name === 'cost-on');
      const task = await workflows.submit(name, { steps });
      await workflows.waitFor(task.id, { timeoutMs: 120_000 });
      return durations.get(task.id)!;
    };
    const configurations = measure.labels.map((name, n) => ({ name, workflow: n ? 'cost-on' : 'cost-off', perStep: [] as number[] }));
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
    console.log(`\n${measure.what} adds ${fmt(on - off)} ms per step (p50 difference), ratio ${(on / off).toFixed(2)}`);
  } finally {
    await bed.tearDown();
  }
}
