import { performance } from 'node:perf_hooks';
import { DeterminismGuard } from '../../libs/duraflow/src/execution/determinism-guard';
import { RunKernel } from '../../libs/duraflow/src/execution/run-kernel';
import { buildWorkflowContext, RunEffects } from '../../libs/duraflow/src/execution/workflow-context';
import type { StepMemo } from '../../libs/duraflow/src/persistence/step.store';
import { BenchContext, rawSection } from '../context';
import { median, progress } from '../stats';

const STEPS = 1_000;

function memosOf(keys: string[]): Map<string, StepMemo> {
  return new Map(
    keys.map((stepKey, index) => [
      stepKey,
      { stepKey, status: 'completed', output: index, outputUndefined: false, attempt: 1, completionSeq: index + 1, compensable: false },
    ]),
  );
}

/** ns per call of `body` over `STEPS` calls, p50 over `rounds` rounds (each with a fresh `setUp`). */
async function nsPerStep<S>(rounds: number, setUp: () => S, body: (state: S, index: number) => unknown): Promise<number> {
  const samples: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const state = setUp();
    const started = performance.now();
    for (let index = 0; index < STEPS; index++) {
      const value = body(state, index);
      if (value instanceof Promise) await value;
    }
    samples.push(((performance.now() - started) * 1e6) / STEPS);
  }
  return median(samples);
}

/**
 * What the determinism guard costs per step, in memory: it adds no statement (the recorded steps
 * it checks against are the memos the run reads anyway), so its cost is CPU on the step path.
 * - a recovered run replaying a recorded step through the run kernel (`ctx.step.run`), and the guard's part of it;
 * - a step when nothing recorded is left (every step of a fresh run): the guard's check alone;
 * - a new step asked for while recorded steps remain (steps started together): the wait until the
 *   code has asked for them, one macrotask turn.
 */
export async function determinismGuardScenario(ctx: BenchContext): Promise<void> {
  const rounds = ctx.quick ? 20 : 300;
  const keys = Array.from({ length: STEPS }, (_, index) => `step-${index}`);
  const memos = memosOf(keys);
  progress(`determinism guard: ${rounds} rounds of ${STEPS} steps`);

  const workflow = { name: 'bench-guard' };
  const lease = { taskId: '00000000-0000-4000-8000-000000000000' };
  // Every step is recorded: no effect of a live run is ever reached.
  const unreached = () => Promise.reject(new Error('not recorded'));
  const effects: RunEffects = {
    runStep: unreached,
    sleep: unreached,
    waitForSignal: unreached,
    startChild: unreached,
    runChild: unreached,
  };
  const contextOf = () => {
    const kernel = new RunKernel({ taskId: lease.taskId, workflowName: workflow.name }, memos, () => undefined);
    const task = { id: lease.taskId, workflowName: workflow.name, input: {}, retryCount: 0 };
    return buildWorkflowContext(task, kernel, effects, new AbortController().signal).ctx;
  };
  const noop = () => undefined;
  // Warm-up: V8 optimizes both paths before they are timed.
  await nsPerStep(20, contextOf, (run, index) => run.step.run(keys[index], noop));

  const replayed = await nsPerStep(rounds, contextOf, (run, index) => run.step.run(keys[index], noop));
  const guardRecorded = await nsPerStep(
    rounds,
    () => new DeterminismGuard(lease.taskId, workflow.name, memos),
    (guard, index) => guard.recorded(keys[index]),
  );
  const guardBuilt = await nsPerStep(
    rounds,
    () => undefined,
    (_, index) => index === 0 && new DeterminismGuard(lease.taskId, workflow.name, memos),
  );
  const emptyMemos = new Map<string, StepMemo>();
  const guardFree = await nsPerStep(
    rounds,
    () => new DeterminismGuard(lease.taskId, workflow.name, emptyMemos),
    (guard, index) => guard.admit(keys[index]),
  );

  const settleSamples: number[] = [];
  for (let sample = 0; sample < (ctx.quick ? 20 : 500); sample++) {
    const guard = new DeterminismGuard(lease.taskId, workflow.name, memosOf(['recorded']));
    const started = performance.now();
    const admitted = guard.admit('new');
    guard.recorded('recorded'); // the other step of the group, asked for in the same turn
    await admitted;
    settleSamples.push((performance.now() - started) * 1000);
  }

  Object.assign(rawSection(ctx, 'determinismGuard'), { replayed, guardRecorded, guardBuilt, guardFree, settleSamples });
  ctx.results.set(
    'guard.replayed',
    replayed,
    `run kernel, recorded step replayed on a recovered run (guard included), p50 of ${rounds} × ${STEPS}`,
  );
  ctx.results.set('guard.recorded', guardRecorded, `the guard's part of it (DeterminismGuard.recorded)`);
  ctx.results.set(
    'guard.build',
    guardBuilt,
    `building the guard of a recovered run of ${STEPS} recorded steps, per recorded step (once per claim)`,
  );
  ctx.results.set('guard.free', guardFree, 'the guard on a step with nothing recorded left (every step of a fresh run)');
  ctx.results.set('guard.settle', median(settleSamples), 'a new step started together with a recorded one waits one macrotask turn, p50');
}
