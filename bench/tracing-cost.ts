/**
 * What tracing and metrics cost per step (issue 18): the same runs on one in-process worker with
 * no tracer configured, with an OpenTelemetry tracer provider (SDK, BatchSpanProcessor, an exporter
 * that drops what it gets), and with metrics on too. Not part of `npm run bench`:
 *
 *   node -r ./test/support/swc-register.js bench/tracing-cost.ts [--pairs 31]
 *
 * Two figures per configuration:
 * - per step, end to end: p50 over `pairs` of (10-step run − 3-step run) / 7, each run timed from
 *   the first to the last line of its run function (as row 32 of the main bench), after a
 *   2,000-step warm-up run. Each step is a real checkpoint, so commit latency dominates.
 * - the hook alone: `observeStepAttempt` around an empty step body inside one observed run (none
 *   is observed when nothing is configured), less the same bare call: p50 of 10 rounds of 20,000
 *   calls. The span (and histogram) work a step adds, without the database.
 * The four configurations are four apps in this process (tracing is decided when an app boots),
 * measured in turn, pair by pair, so a change of load hits them alike.
 * Prints one Markdown table; figures in bench/README.md, "Tracing and metrics (issue 18)".
 */
import 'reflect-metadata';
import { performance } from 'node:perf_hooks';
import { trace } from '@opentelemetry/api';
import { ExportResultCode } from '@opentelemetry/core';
import { BatchSpanProcessor, BasicTracerProvider, ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import { context, propagation } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { Registry } from 'prom-client';
import { DuraflowModuleOptions, workflow, WorkflowService } from '@duraflow/nestjs';
import { observeStepAttempt, RunObserver } from '@duraflow/nestjs/observability/run-observer';
import type { TaskLease } from '@duraflow/nestjs/lease/task-lease';
import type { ClaimedTask } from '@duraflow/nestjs/persistence/lifecycle/claim-tasks';
import { TestBed } from '../test/support/test-bed';
import { median, progress, quantile } from './stats';

/** An exporter that drops everything: the cost measured is Duraflow's and the SDK's, not a network's. */
class DiscardingExporter implements SpanExporter {
  exported = 0;
  export(spans: ReadableSpan[], done: (result: { code: ExportResultCode }) => void): void {
    this.exported += spans.length;
    done({ code: ExportResultCode.SUCCESS });
  }
  async shutdown(): Promise<void> {}
}

const durations = new Map<string, number>();

/** A workflow of `steps` no-op steps, timed from the first to the last line of its run function; one name per configuration. */
function stepsWorkflow(name: string) {
  return workflow<{ steps: number }>(name, async (ctx) => {
    const started = performance.now();
    for (let i = 0; i < ctx.input.steps; i++) await ctx.step.run(`s${i}`, () => i);
    durations.set(ctx.runId, performance.now() - started);
  });
}

interface Configuration {
  name: string;
  run(steps: number): Promise<number>;
  /** The hook alone: µs per call above a bare call, over `calls`. */
  hook(calls: number): Promise<number>;
  perStep: number[];
  hookUs: number[];
}

/** Boots one app (tracing is decided at its boot, so the tracer provider must be registered, or not, before). */
async function configure(bed: TestBed, name: string, workflowName: string, options: DuraflowModuleOptions): Promise<Configuration> {
  const app = await bed.start({
    duraflow: { workflows: [stepsWorkflow(workflowName)], worker: { pollIntervalMs: 50 }, reaper: { enabled: false }, ...options },
  });
  const workflows = app.get(WorkflowService);
  const observer = app.get(RunObserver, { strict: false });
  const lease = { taskId: 'bench', claimToken: 'bench', stoppedBecause: undefined } as unknown as TaskLease;
  const claimed = {
    task: { id: '00000000-0000-4000-8000-000000000000', workflowName, retryCount: 0 },
    claimToken: 'bench',
  } as ClaimedTask;
  const body = () => Promise.resolve(1);
  return {
    name,
    perStep: [],
    hookUs: [],
    async run(steps) {
      const task = await workflows.submit(workflowName, { steps });
      await workflows.waitFor(task.id, { timeoutMs: 120_000 });
      return durations.get(task.id)!;
    },
    async hook(calls) {
      let hookMs = 0;
      // Inside one observed run, as a step runs (observe() registers nothing when nothing is configured).
      await observer.observe(claimed, lease, async () => {
        const started = performance.now();
        for (let i = 0; i < calls; i++) await observeStepAttempt(lease, 'k', 1, body);
        hookMs = performance.now() - started;
        return 'completed';
      });
      const bare = performance.now();
      for (let i = 0; i < calls; i++) await body();
      return ((hookMs - (performance.now() - bare)) / calls) * 1000;
    },
  };
}

async function main(): Promise<void> {
  const pairsFlag = process.argv.indexOf('--pairs');
  const pairs = pairsFlag > 0 ? Number(process.argv[pairsFlag + 1]) : 31;
  const bed = new TestBed();
  await bed.setUp({ prefix: 'duraflow_bench' });
  const exporter = new DiscardingExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] });
  try {
    // Booted before the tracer provider is registered: these two see no tracer.
    const configurations = [
      await configure(bed, 'no tracer, no metrics (the default)', 'cost-off', {}),
      await configure(bed, 'metrics only', 'cost-metrics', { metrics: { registry: new Registry() } }),
    ];
    trace.setGlobalTracerProvider(provider);
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    configurations.push(
      await configure(bed, 'tracer (SDK, batch processor)', 'cost-tracer', {}),
      await configure(bed, 'tracer and metrics', 'cost-both', { metrics: { registry: new Registry() } }),
    );

    progress('warm-up: a 2,000-step run and 20,000 hook calls in each configuration');
    for (const config of configurations) {
      await config.run(2_000);
      await config.hook(20_000);
    }
    // Interleaved, so a change of the machine's load meanwhile hits every configuration alike.
    for (let i = 0; i < pairs; i++) {
      if (i % 10 === 0) progress(`pair ${i + 1}/${pairs}`);
      for (const config of configurations) {
        const ten = await config.run(10);
        const three = await config.run(3);
        config.perStep.push((ten - three) / 7);
      }
    }
    for (let round = 0; round < 10; round++) for (const config of configurations) config.hookUs.push(await config.hook(20_000));
    await provider.forceFlush();
    progress(`spans exported: ${exporter.exported}`);

    const fmt = (ms: number) => ms.toFixed(3);
    console.log(`| configuration | per step, end to end: p50 (p90) of ${pairs} | the hook alone, per step: p50 of 10 × 20,000 |`);
    console.log('|---|---|---|');
    for (const config of configurations) {
      console.log(
        `| ${config.name} | ${fmt(median(config.perStep))} ms (${fmt(quantile(config.perStep, 0.9))} ms) | ${median(config.hookUs).toFixed(2)} µs |`,
      );
    }
  } finally {
    await provider.shutdown();
    await bed.tearDown();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
