import { performance } from 'node:perf_hooks';
import { FunctionalWorkflowDefinition, workflow, WorkflowContext } from '@duraflow/nestjs';

/** No-op steps `s1..sN` (each returns undefined, so the checkpoint writes a NULL output). */
export const NOOP_WORKFLOW = 'bench-noop';
/** One step that hangs on its first execution (until its signal aborts) and returns at once after. */
export const RECOVER_WORKFLOW = 'bench-recover';
/** Like bench-noop, and tells a probe in the same process when its run function starts and ends. */
export const PROBE_WORKFLOW = 'bench-probe';

export interface NoopInput {
  steps: number;
}

export interface ProbeInput extends NoopInput {
  /** Which measurement this run belongs to. */
  sample: number;
}

async function runNoopSteps(ctx: WorkflowContext<NoopInput>): Promise<void> {
  const steps = ctx.input?.steps ?? 0;
  for (let n = 1; n <= steps; n++) await ctx.step.run(`s${n}`, () => undefined);
}

export const noopWorkflow = workflow<NoopInput, void>(NOOP_WORKFLOW, runNoopSteps);

export const recoverWorkflow = workflow(RECOVER_WORKFLOW, async (ctx) => {
  await ctx.step.run('hold', ({ signal }) => (ctx.attempt === 1 ? hangUntilAborted(signal) : undefined));
});

/** `concurrency: 10`: the flow-control drain with a workflow limit (0 steps). */
export const CAPPED_WORKFLOW = 'bench-capped';
/** `concurrency: 100`: a workflow limit above what one worker holds, completions in flight included (it never binds: the check's own cost). */
export const CAPPED_100_WORKFLOW = 'bench-capped-100';
/** `concurrencyKey: input.key`, `keyConcurrency: 1`: the flow-control drain over many keys (0 steps). */
export const KEYED_WORKFLOW = 'bench-keyed';

/** The flow-control bench workflows, by name: registered by a worker process started with `flowWorkflow`. */
export const FLOW_WORKFLOWS: Record<string, FunctionalWorkflowDefinition> = {
  [CAPPED_WORKFLOW]: workflow<NoopInput, void>(CAPPED_WORKFLOW, runNoopSteps, { concurrency: 10 }),
  [CAPPED_100_WORKFLOW]: workflow<NoopInput, void>(CAPPED_100_WORKFLOW, runNoopSteps, { concurrency: 100 }),
  [KEYED_WORKFLOW]: workflow<NoopInput & { key: string }, void>(KEYED_WORKFLOW, runNoopSteps, {
    concurrencyKey: (input) => input.key,
    keyConcurrency: 1,
  }),
};

/** `steps` steps whose body waits `waitMs` (an HTTP call, a query elsewhere): the concurrency curve's waiting runs. */
export const WAITING_WORKFLOW = 'bench-waiting';

export const waitingWorkflow = workflow<NoopInput & { waitMs: number }, void>(WAITING_WORKFLOW, async (ctx) => {
  for (let n = 1; n <= ctx.input.steps; n++)
    await ctx.step.run(`s${n}`, () => new Promise<void>((resolve) => setTimeout(resolve, ctx.input.waitMs)));
});

/** The workflows of a bench worker process. */
export const WORKER_WORKFLOWS: FunctionalWorkflowDefinition[] = [noopWorkflow, recoverWorkflow, waitingWorkflow];

/**
 * Where a probe workflow reports, by sample number, the `performance.now()` of the first and
 * the last line of its run function. Only meaningful in the process that submits.
 */
export class RunProbe {
  private readonly started = new Map<number, Deferred>();
  private readonly finished = new Map<number, Deferred>();

  /** Resolves with the time the run function of `sample` started. */
  startOf(sample: number): Promise<number> {
    return deferred(this.started, sample).promise;
  }

  /** Resolves with the time the run function of `sample` reached its last line. */
  endOf(sample: number): Promise<number> {
    return deferred(this.finished, sample).promise;
  }

  readonly workflow: FunctionalWorkflowDefinition<ProbeInput, void> = workflow<ProbeInput, void>(PROBE_WORKFLOW, async (ctx) => {
    deferred(this.started, ctx.input.sample).resolve(performance.now());
    await runNoopSteps(ctx);
    deferred(this.finished, ctx.input.sample).resolve(performance.now());
  });
}

interface Deferred {
  promise: Promise<number>;
  resolve: (at: number) => void;
}

function deferred(map: Map<number, Deferred>, sample: number): Deferred {
  let entry = map.get(sample);
  if (!entry) {
    let resolve!: (at: number) => void;
    const promise = new Promise<number>((r) => (resolve = r));
    entry = { promise, resolve };
    map.set(sample, entry);
  }
  return entry;
}

function hangUntilAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) return reject(signal.reason);
    signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

/** Durable primitives (issue 15): each returns, or records, the wall time (sub-millisecond) of the moment that is measured. */
export const SLEEP_WORKFLOW = 'bench-sleep';
export const SIGNAL_WORKFLOW = 'bench-signal';
export const PARENT_WORKFLOW = 'bench-parent';

/** Wall time with sub-millisecond resolution, comparable across the workflows of one process. */
export function wallNow(): number {
  return performance.timeOrigin + performance.now();
}

export const sleepWorkflow = workflow(SLEEP_WORKFLOW, async (ctx: WorkflowContext<{ ms: number }>) => {
  await ctx.sleep('nap', ctx.input.ms);
  return { resumedAt: wallNow() };
});

export const signalWorkflow = workflow(SIGNAL_WORKFLOW, async (ctx: WorkflowContext) => {
  const startedAt = await ctx.step.run('started', () => wallNow());
  await ctx.waitForSignal('go');
  return { startedAt, resumedAt: wallNow() };
});

export const parentWorkflow = workflow(PARENT_WORKFLOW, async (ctx: WorkflowContext<{ children: number }>) => {
  for (let n = 1; n <= ctx.input.children; n++) await ctx.runChild(`c${n}`, NOOP_WORKFLOW, { steps: 0 });
});

export const PRIMITIVE_WORKFLOWS: FunctionalWorkflowDefinition[] = [sleepWorkflow, signalWorkflow, parentWorkflow];
