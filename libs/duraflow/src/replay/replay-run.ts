import {
  ChildWorkflowFailedError,
  DuplicateStepKeyError,
  InvalidStepKeyError,
  NestedStepError,
  NonDeterminismError,
  SignalTimeoutError,
} from '../domain/errors';
import { signalWaitKey } from '../execution/durable-primitives';
import { DeterminismGuard } from '../execution/determinism-guard';
import { RunPatches } from '../execution/run-patches';
import { RunScope, runScopeStorage } from '../decorators/run-scope';
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
 * running any step body: a recorded completed step returns its saved output; the first step the
 * run never completed ends the replay there (fine, if the determinism guard lets it start: no
 * recorded step remains unasked). The guard and `ctx.patched` are the worker's own
 * (execution/determinism-guard.ts, execution/run-patches.ts); nothing is written.
 */
export async function replayRun(
  recorded: RecordedRun,
  run: (ctx: WorkflowContext) => Promise<unknown>,
  options: { timeoutMs: number },
): Promise<ReplayOutcome> {
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
  const guard = new DeterminismGuard(recorded.taskId, recorded.workflowName, memos);
  const patches = new RunPatches(memos, guard, () => undefined);
  const used = new Set<string>();
  let reachedNewStep: (key: string) => void = () => undefined;
  const newStep = new Promise<string>((resolve) => (reachedNewStep = resolve));

  /**
   * A step or a durable primitive (sleep, signal wait, child: rows in the same key namespace):
   * a recorded completed row gives `onRecorded(memo)`, a recorded failed one `onFailed(memo)`
   * when the primitive recorded its failure (a signal's timeout, a child's failure); anything else
   * is where the recorded run stopped, and ends the replay once the guard admits it.
   */
  const replayKey = async <T>(key: string, onRecorded: (memo: StepMemo) => T, onFailed?: (memo: StepMemo) => never): Promise<T> => {
    if (typeof key !== 'string' || key.length === 0 || key.length > 255) throw new InvalidStepKeyError(key);
    const parent = runScopeStorage.getStore()?.step;
    if (parent) throw new NestedStepError(key, parent.key);
    if (used.has(key)) throw new DuplicateStepKeyError(recorded.workflowName, key);
    used.add(key);
    const memo = memos.get(key);
    if (memo?.status === 'completed') {
      guard.recorded(key);
      return onRecorded(memo);
    }
    if (memo?.status === 'failed' && onFailed) {
      guard.recorded(key);
      onFailed(memo);
    }
    // A wait the run stopped at (a child it waits for): where the recorded run is now.
    if (memo?.status === 'waiting') guard.recorded(key);
    const admitted = guard.admit(key);
    if (admitted) await admitted;
    reachedNewStep(key);
    return NEVER;
  };
  const savedOutput = (memo: StepMemo): any => (memo.outputUndefined ? undefined : memo.output);
  const runStep = <T>(key: string): Promise<T> => replayKey(key, (memo) => savedOutput(memo) as T);
  const signalWaits = new Map<string, number>();
  const scope: RunScope = { runStep: (key) => runStep(key) };
  const ctx: WorkflowContext = {
    runId: recorded.taskId,
    workflowName: recorded.workflowName,
    input: recorded.input,
    step: { run: (key) => runStep(key) },
    attempt: recorded.retryCount + 1,
    signal: new AbortController().signal,
    patched: (patchId) => patches.patched(patchId),
    deprecatePatch: (patchId) => patches.deprecatePatch(patchId),
    sleep: (key) => replayKey(key, () => undefined),
    sleepUntil: (key) => replayKey(key, () => undefined),
    waitForSignal: (name, options) => {
      const n = (signalWaits.get(name) ?? 0) + 1;
      signalWaits.set(name, n);
      return replayKey(signalWaitKey(name, n), savedOutput, () => {
        throw new SignalTimeoutError(recorded.taskId, name, options?.timeoutMs ?? null);
      });
    },
    startChild: (key) => replayKey(key, (memo) => ({ id: String((savedOutput(memo) as { id?: unknown } | undefined)?.id ?? '') })),
    runChild: (key, workflowName) =>
      replayKey(key, savedOutput, () => {
        throw new ChildWorkflowFailedError('', workflowName, 'failed', null);
      }),
  };

  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), options.timeoutMs)));
  let ended: { kind: 'returned' } | { kind: 'threw'; error: unknown } | { kind: 'new-step'; key: string } | 'timeout';
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
  const diverged = ended !== 'timeout' && ended.kind === 'returned' ? guard.finish() : guard.diverged;
  if (diverged) return divergence(diverged);
  if (ended === 'timeout') {
    return {
      result: 'error',
      message: `did not return or reach a step within ${options.timeoutMs} ms (awaiting something outside steps?)`,
    };
  }
  if (ended.kind === 'threw') return { result: 'error', message: `threw outside any step: ${describeError(ended.error).message}` };
  if (ended.kind === 'new-step') return { result: 'ok', reached: 'new-step', newStep: ended.key };
  return { result: 'ok', reached: 'end' };
}

function divergence(error: NonDeterminismError): ReplayOutcome {
  return { result: 'diverged', recordedStep: error.recordedStep, requestedStep: error.requestedStep, message: error.message };
}
