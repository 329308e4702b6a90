import { runScopeStorage } from '../decorators/run-scope';
import { DuplicateStepKeyError, InvalidStepKeyError, NestedStepError, RunAbortedError, StepOutsideRunError } from '../domain/errors';
import { signalWaitKey } from '../domain/reserved-keys';
import { StepMemo } from '../persistence/step.store';
import { hasNul } from '../validation/storable-text';
import { DeterminismGuard } from './determinism-guard';
import { PatchMarkerWriter, RunPatches } from './run-patches';

/**
 * Thrown through the workflow's code once its run suspended (the task is `pending` again,
 * waiting): the run is over for this claim; it is no failure and counts no retry.
 */
export class RunSuspended extends Error {
  constructor(
    readonly taskId: string,
    readonly wakeAt: Date,
  ) {
    super(`Task ${taskId} is waiting (until ${wakeAt.toISOString()}); this run is over`);
    this.name = 'RunSuspended';
  }
}

/** Which run a kernel serves. */
export interface KernelRun {
  taskId: string;
  workflowName: string;
}

/** What the kernel asks of the run it serves: why it stopped, if it did (the live run's lease); a replay never stops. */
export type StopReason = () => string | undefined;

/**
 * The run kernel: what every run of a workflow goes through, the worker's (live-run.ts) and the
 * replay check's (replay/replay-run.ts) alike, so both judge a run's recorded path the same way.
 *
 * One key namespace: every primitive of the run (a step, a sleep, a signal wait, a child, a
 * patch marker) takes a key once (`enter`), checked the same way. Then the memo: the row the
 * run recorded under that key in an earlier run. A row the primitive resumes from is consumed by
 * the determinism guard and handed back; for anything else the primitive waits for the guard's
 * admission (and for `ctx.patched`'s answers to land) before it may start. It also numbers the
 * run's signal waits (`signal:<name>#<n>`), counts its completions (completion_seq), and knows
 * whether the run suspended (a wait not over) or has steps a failure would undo.
 */
export class RunKernel {
  readonly guard: DeterminismGuard;
  readonly patches: RunPatches;
  /** Set once the run suspended: the task waits until then. */
  suspendedUntil: Date | undefined;
  /** Some completed step (or child) of the task has a compensation that has not run: a failure rolls back. */
  compensable: boolean;
  private readonly usedKeys = new Set<string>();
  private readonly signalWaits = new Map<string, number>();
  private nextCompletionSeq: number;
  private closed = false;

  constructor(
    private readonly run: KernelRun,
    private readonly memos: ReadonlyMap<string, StepMemo>,
    writeMarker: PatchMarkerWriter,
    private readonly stopped: StopReason = () => undefined,
  ) {
    this.guard = new DeterminismGuard(run.taskId, run.workflowName, memos);
    this.patches = new RunPatches(memos, this.guard, writeMarker);
    const recorded = [...memos.values()];
    this.compensable = recorded.some((memo) => memo.compensable);
    this.nextCompletionSeq = Math.max(0, ...recorded.map((memo) => memo.completionSeq ?? 0)) + 1;
  }

  /**
   * A primitive of the run takes `key`. Resolves with the row recorded under it when
   * `resumes(row)` says the primitive goes on from it (a completed step, any row of a wait);
   * otherwise with undefined once the primitive may start anew. Throws at once for a bad or
   * reused key (or a step whose `fn` is no function), a call inside a step body or after the run returned, and once the run suspended
   * or stopped; rejects with the NonDeterminismError when the run's path diverged.
   */
  async enter(key: string, resumes: (memo: StepMemo) => boolean, step?: { fn: unknown }): Promise<StepMemo | undefined> {
    this.reserve(key, step);
    if (this.suspendedUntil) throw new RunSuspended(this.run.taskId, this.suspendedUntil);
    const memo = this.memos.get(key);
    if (memo && resumes(memo)) {
      this.guard.recorded(key);
      return memo;
    }
    this.throwIfStopped();
    const admitted = this.guard.admit(key);
    const markers = this.patches.pending;
    if (admitted || markers) await Promise.all([admitted, markers]);
    return undefined;
  }

  /** The row recorded under `key`, whatever its status (a step's failed attempts before this run). */
  recorded(key: string): StepMemo | undefined {
    return this.memos.get(key);
  }

  /** The key of the next `ctx.waitForSignal(name)` of this run. */
  nextSignalWaitKey(name: string): string {
    const n = (this.signalWaits.get(name) ?? 0) + 1;
    this.signalWaits.set(name, n);
    return signalWaitKey(name, n);
  }

  /** The completion_seq for a step or wait that completes now. */
  takeCompletionSeq(): number {
    return this.nextCompletionSeq++;
  }

  /** A wait completed at `seq` (the database may have placed it later than the run's count). */
  completedAt(seq: number): void {
    if (seq >= this.nextCompletionSeq) this.nextCompletionSeq = seq + 1;
  }

  /** The run suspended until `wakeAt`: its code unwinds with RunSuspended, and no primitive may start. */
  suspend(wakeAt: Date): RunSuspended {
    this.suspendedUntil = wakeAt;
    return new RunSuspended(this.run.taskId, wakeAt);
  }

  /** After the run function returned, no primitive may start. */
  close(): void {
    this.closed = true;
  }

  /** Throws RunAbortedError once the run stopped (cancelled, lease lost, shutdown). */
  throwIfStopped(): void {
    const reason = this.stopped();
    if (reason) throw new RunAbortedError(this.run.taskId, reason);
  }

  /** A key taken once, valid, outside any step body, before the run returned. */
  private reserve(key: string, step: { fn: unknown } | undefined): void {
    if (typeof key !== 'string' || key.length === 0 || key.length > 255 || hasNul(key)) throw new InvalidStepKeyError(key);
    if (step && typeof step.fn !== 'function') throw new TypeError(`ctx.step.run("${key}", fn): fn must be a function.`);
    if (this.closed) throw new StepOutsideRunError(key);
    const parent = runScopeStorage.getStore()?.step;
    if (parent) throw new NestedStepError(key, parent.key);
    if (this.usedKeys.has(key)) throw new DuplicateStepKeyError(this.run.workflowName, key);
    this.usedKeys.add(key);
  }
}
