import { NonDeterminismError } from '../domain/errors';
import { RunKernel } from '../execution/run-kernel';
import { buildWorkflowContext, RunEffects } from '../execution/workflow-context';
import { runScopeStorage } from '../decorators/run-scope';
import { WorkflowContext } from '../domain/workflow-context';
import { StepMemo } from '../persistence/step.store';
import { describeError } from '../util/describe-error';
import { RecordedRun } from './recorded-run';

/** How the replay of one recorded run ended. */
export type ReplayOutcome =
  /** Today's code asked for the recorded steps (in any order) and then returned, or reached a step the run never recorded. */
  | { result: 'ok'; reached: 'end' | 'new-step'; newStep?: string }
  /** Today's code takes another path than the one recorded: the guard would hold this run. */
  | { result: 'diverged'; recordedStep: string; requestedStep: string | null; message: string }
  /** The code threw outside any step, or did not come back within the time allowed: nothing to conclude. */
  | { result: 'error'; message: string };

/** Thrown into nothing: a replay that reached a new step never resumes. */
const NEVER = new Promise<never>(() => undefined);

/**
 * Replays one recorded run against `run` (today's code of its workflow and version) without
 * running any step body: the worker's run kernel and context (execution/run-kernel.ts,
 * execution/workflow-context.ts) answer every recorded primitive as a live run would, with effects
 * that run nothing: the first primitive the run never finished ends the replay there (fine, if
 * the determinism guard lets it start: no recorded step remains unasked). Nothing is written.
 */
export async function replayRun(
  recorded: RecordedRun,
  run: (ctx: WorkflowContext) => Promise<unknown>,
  options: { timeoutMs: number },
): Promise<ReplayOutcome> {
  const kernel = new RunKernel({ taskId: recorded.taskId, workflowName: recorded.workflowName }, recordedMemos(recorded), () => undefined);
  let reachedNewStep: (key: string) => void = () => undefined;
  const newStep = new Promise<string>((resolve) => (reachedNewStep = resolve));
  // Where the recorded run stopped: the replay ends at the first primitive it never finished.
  const stop = (key: string): Promise<never> => {
    reachedNewStep(key);
    return NEVER;
  };
  const effects: RunEffects = { runStep: stop, sleep: stop, waitForSignal: stop, startChild: stop, runChild: stop };
  const task = { id: recorded.taskId, workflowName: recorded.workflowName, input: recorded.input, retryCount: recorded.retryCount };
  const { ctx, scope } = buildWorkflowContext(task, kernel, effects, new AbortController().signal);

  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), options.timeoutMs)));
  let ended: Ended;
  try {
    ended = await Promise.race([
      runScopeStorage
        .run(scope, () => run(ctx))
        .then(
          () => ({ kind: 'returned' as const }),
          (error: unknown) => ({ kind: 'threw' as const, error }),
        ),
      newStep.then((key) => ({ kind: 'new-step' as const, key })),
      timedOut,
    ]);
  } finally {
    clearTimeout(timer);
  }
  return outcomeOf(ended, kernel, options.timeoutMs);
}

type Ended = { kind: 'returned' } | { kind: 'threw'; error: unknown } | { kind: 'new-step'; key: string } | 'timeout';

/** The recorded steps as the kernel reads a task's memos. */
function recordedMemos(recorded: RecordedRun): Map<string, StepMemo> {
  const memos = new Map<string, StepMemo>();
  for (const step of recorded.steps) {
    memos.set(step.stepKey, {
      stepKey: step.stepKey,
      status: step.status,
      output: step.output,
      outputUndefined: !('output' in step),
      attempt: 1,
      completionSeq: step.completionSeq,
      compensable: false,
      kind: step.kind ?? null,
    });
  }
  return memos;
}

function outcomeOf(ended: Ended, kernel: RunKernel, timeoutMs: number): ReplayOutcome {
  const diverged = ended !== 'timeout' && ended.kind === 'returned' ? kernel.guard.finish() : kernel.guard.diverged;
  if (diverged) return divergence(diverged);
  if (ended === 'timeout') {
    return { result: 'error', message: `did not return or reach a step within ${timeoutMs} ms (awaiting something outside steps?)` };
  }
  if (ended.kind === 'threw') return { result: 'error', message: `threw outside any step: ${describeError(ended.error).message}` };
  if (ended.kind === 'new-step') return { result: 'ok', reached: 'new-step', newStep: ended.key };
  return { result: 'ok', reached: 'end' };
}

function divergence(error: NonDeterminismError): ReplayOutcome {
  return { result: 'diverged', recordedStep: error.recordedStep, requestedStep: error.requestedStep, message: error.message };
}
