import { SIGNAL_NAME_PATTERN } from '../domain/duraflow.constants';
import { ChildWorkflowFailedError, InvalidPrimitiveCallError, InvalidSignalNameError, SignalTimeoutError } from '../domain/errors';
import { ChildWorkflowOptions, RunLogger, SignalWaitOptions, StepContext, StepOptions, WorkflowContext } from '../domain/workflow-context';
import { RunScope } from '../decorators/run-scope';
import { StepMemo } from '../persistence/step.store';
import { DUE_TIME_RANGE, isAcceptedDueTime, LATEST_DUE_TIME } from '../validation/due-time';
import { RunKernel } from './run-kernel';
import { TalkEffects, talkPrimitives } from './run-talk';
import { CallbackEffects, callbackPrimitives } from './run-callbacks';

/** The task a context is built for. */
export interface ContextTask {
  id: string;
  workflowName: string;
  input: unknown;
  /** Recoveries so far (`retry_count`): `ctx.attempt` is one more. */
  retryCount: number | null;
}

/**
 * What a run does at a primitive the kernel let through and that has not finished in an
 * earlier run: the worker runs it (live-run.ts), the replay check stops there
 * (replay/replay-run.ts). What a primitive recorded as finished is answered by the context
 * itself, the same way for both.
 */
export interface RunEffects extends CallbackEffects {
  /** A step to run, after the attempts recorded in `previous` (a failed attempt's row) if any. */
  runStep<T>(key: string, fn: (step: StepContext) => T | Promise<T>, options: StepOptions | undefined, previous?: StepMemo): Promise<T>;
  /** A sleep not over in an earlier run, until `wakeAt` (its first end: a replay never pushes it later). */
  sleep(key: string, wakeAt: Date, recorded: StepMemo | undefined, input: Record<string, unknown>): Promise<void>;
  /** A signal wait not settled in an earlier run, until `deadline` (null: none). */
  waitForSignal(key: string, name: string, deadline: Date | null, timeoutMs: number | undefined): Promise<unknown>;
  /** A child to start (startChild: its id; the run goes on). */
  startChild(key: string, workflowName: string, input: unknown, options: ChildWorkflowOptions | undefined): Promise<string>;
  /** A child to run (started now when `recorded` is undefined) and wait for: its output. */
  runChild(
    key: string,
    workflowName: string,
    input: unknown,
    options: ChildWorkflowOptions | undefined,
    recorded: StepMemo | undefined,
  ): Promise<unknown>;
  /** `ctx.log` (live-run's run log); without one (the replay check) the lines go nowhere. */
  log?: RunLogger;
  /** `ctx.setEvent` / `writeStream` / `closeStream` (live-run's RunTalk); without one (the replay check) nothing is written. */
  talk?: TalkEffects;
}

const SILENT_LOG: RunLogger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

/** A step resumes from a completed row only; its failed attempts are run again. */
const COMPLETED = (memo: StepMemo) => memo.status === 'completed';
/** A wait or a child resumes from any row it recorded (waiting, completed, failed). */
const ANY_ROW = () => true;

/**
 * The WorkflowContext of one run: `ctx.step.run` and @Step methods (through the run scope it returns), the
 * durable primitives and `ctx.patched`, each through the kernel, answered from what the run
 * recorded where it can, and handed to `effects` where it cannot.
 */
export function buildWorkflowContext(
  task: ContextTask,
  kernel: RunKernel,
  effects: RunEffects,
  signal: AbortSignal,
  /** The engine's clock (domain/engine-clock.ts): when a sleep or a signal wait's timeout ends. */
  now: () => number = Date.now,
): BuiltContext {
  const step = async <T>(key: string, fn: (step: StepContext) => T | Promise<T>, options?: StepOptions): Promise<T> => {
    const recorded = await kernel.enter(key, COMPLETED, { fn });
    if (recorded) return savedOutput(recorded) as T;
    return effects.runStep(key, fn, options, kernel.recorded(key));
  };
  const sleepUntil = async (key: string, until: Date, input: Record<string, unknown>): Promise<void> => {
    const recorded = await kernel.enter(key, ANY_ROW);
    if (recorded?.status === 'completed') return;
    return effects.sleep(key, recorded?.wakeAt ?? until, recorded, input);
  };
  const ctx: WorkflowContext = {
    runId: task.id,
    workflowName: task.workflowName,
    input: task.input,
    attempt: (task.retryCount ?? 0) + 1,
    signal,
    log: effects.log ?? SILENT_LOG,
    step: { run: step },
    patched: (patchId) => kernel.patches.patched(patchId),
    deprecatePatch: (patchId) => kernel.patches.deprecatePatch(patchId),
    sleep: (key, ms) => sleepUntil(key, sleepDue(key, ms, now()), { ms }),
    sleepUntil: (key, date) => {
      const until = checkedDate(key, date);
      return sleepUntil(key, until, { until: until.toISOString() });
    },
    waitForSignal: (name, options) => waitForSignal(task, kernel, effects, now, name, options),
    startChild: async (key, workflowName, input, options) => {
      const recorded = await kernel.enter(key, ANY_ROW);
      const id = recorded ? childIdOf(recorded) : await effects.startChild(key, workflowName, input, options);
      kernel.compensable = true;
      return { id };
    },
    runChild: async <TOutput>(key: string, workflowName: string, input?: unknown, options?: ChildWorkflowOptions) => {
      const recorded = await kernel.enter(key, ANY_ROW);
      if (recorded?.status === 'failed') throw childFailure(recorded.error ?? {}, childIdOf(recorded), workflowName);
      const output =
        recorded?.status === 'completed' ? savedOutput(recorded) : await effects.runChild(key, workflowName, input, options, recorded);
      kernel.compensable = true;
      return output as TOutput;
    },
    ...callbackPrimitives(task.id, kernel, effects, step),
    ...talkPrimitives(effects.talk),
  };
  return { ctx, scope: { runStep: step } };
}

/** A run's context, and the run scope its code runs in (what @Step methods find: decorators/run-scope.ts). */
export interface BuiltContext {
  ctx: WorkflowContext;
  scope: RunScope;
}

async function waitForSignal<T>(
  task: ContextTask,
  kernel: RunKernel,
  effects: RunEffects,
  now: () => number,
  name: string,
  options?: SignalWaitOptions,
): Promise<T> {
  if (typeof name !== 'string' || !SIGNAL_NAME_PATTERN.test(name)) throw new InvalidSignalNameError(name);
  const timeoutMs = options?.timeoutMs;
  if (timeoutMs !== undefined && (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs < 0)) {
    throw new InvalidPrimitiveCallError(
      `ctx.waitForSignal("${name}")`,
      `timeoutMs must be a finite number >= 0, got ${String(timeoutMs)}.`,
    );
  }
  if (timeoutMs !== undefined && !isAcceptedDueTime(new Date(now() + timeoutMs))) {
    throw new InvalidPrimitiveCallError(
      `ctx.waitForSignal("${name}")`,
      `timeoutMs ${timeoutMs} ends after ${LATEST_DUE_TIME.toISOString()}, the latest deadline a wait takes; leave timeoutMs out to wait for ever.`,
    );
  }
  const key = kernel.nextSignalWaitKey(name);
  const recorded = await kernel.enter(key, ANY_ROW);
  if (recorded?.status === 'completed') return savedOutput(recorded) as T;
  if (recorded?.status === 'failed') throw new SignalTimeoutError(task.id, name, timeoutMs ?? null);
  const deadline = recorded?.wakeAt ?? (timeoutMs === undefined ? null : new Date(now() + timeoutMs));
  return (await effects.waitForSignal(key, name, deadline, timeoutMs)) as T;
}

/** A sleep's wake-up: `ms` from now, at the latest LATEST_DUE_TIME. */
function sleepDue(key: string, ms: unknown, now: number): Date {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    throw new InvalidPrimitiveCallError(`ctx.sleep("${key}", ${String(ms)})`, 'ms must be a finite number of milliseconds >= 0.');
  }
  const due = new Date(now + ms);
  if (!isAcceptedDueTime(due)) {
    throw new InvalidPrimitiveCallError(
      `ctx.sleep("${key}", ${ms})`,
      `the wake-up would be after ${LATEST_DUE_TIME.toISOString()}, the latest a sleep takes.`,
    );
  }
  return due;
}

function checkedDate(key: string, date: unknown): Date {
  const until = date instanceof Date ? date : typeof date === 'string' ? new Date(date) : new Date(NaN);
  if (Number.isNaN(until.getTime())) {
    throw new InvalidPrimitiveCallError(`ctx.sleepUntil("${key}", ${String(date)})`, 'pass a valid Date or an ISO-8601 string.');
  }
  if (!isAcceptedDueTime(until)) {
    throw new InvalidPrimitiveCallError(`ctx.sleepUntil("${key}", ${until.toISOString()})`, `pass a time ${DUE_TIME_RANGE}.`);
  }
  return until;
}

/** What a recorded row returns: its output, `undefined` for a step that returned nothing (stored as SQL NULL). */
export function savedOutput(memo: StepMemo): unknown {
  return memo.outputUndefined ? undefined : memo.output;
}

/** The child a recorded child row started (its input names it; an exported run has only its `{ id }` output). */
export function childIdOf(memo: StepMemo): string {
  const input = memo.input as { childTaskId?: string } | undefined;
  return input?.childTaskId ?? String((savedOutput(memo) as { id?: unknown } | undefined)?.id ?? '');
}

/** A child recorded as failed (or that failed now), as the parent's code sees it: `error` is what its wait row recorded. */
export function childFailure(error: Record<string, unknown>, childTaskId: string, workflowName: string): ChildWorkflowFailedError {
  return new ChildWorkflowFailedError(childTaskId, workflowName, String(error.status ?? 'failed'), error.childError ?? null);
}
