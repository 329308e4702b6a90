import { NonDeterminismError } from '../domain/errors';
import { StepMemo } from '../persistence/step.store';
import { isPatchMarker } from '../domain/reserved-keys';

/** Macrotask rounds a new step waits at most for the recorded steps still to be asked for (see `admit`). */
const MAX_SETTLE_ROUNDS = 5;

function nextMacrotask(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * The determinism guard of one run: today's code must take the path the run recorded.
 *
 * States: `replaying` while recorded completed steps remain that the code has not asked for;
 * `free` once none remains (every run that recorded nothing starts free: the guard then costs
 * one size check per step); `diverged` for good once the paths differ.
 *
 * The rule. The code asks for steps; a recorded one is consumed (its saved output returned, in
 * any order: outputs are memoized by key, so a different order among recorded steps changes
 * nothing the run sees). A step that was never recorded may start only when no recorded step is
 * left unconsumed: a recorded step still to come means the old run went past this point on
 * another path (a step inserted, renamed or moved before recorded ones, or a recorded one
 * removed). Steps started together (`Promise.all`) are asked for in an order that can differ
 * between runs, and a new one may be asked for just before a recorded one of the same group; so
 * a new step that finds recorded steps left waits, without starting, until the code can ask for
 * nothing more without a step finishing: macrotask turns (all microtasks of memoized steps
 * resolving run before each) until a turn consumes nothing. Only if recorded steps are still
 * left then, the paths diverged. A run that returns with recorded steps never asked for
 * diverged too (a recorded step was removed). Patch markers (`patch:<id>`) are not steps: they
 * answer `ctx.patched` and never count as left over.
 *
 * What it cannot see: a step body or its input that changed (outputs are replayed by key),
 * changes after the last recorded step, and side effects outside steps.
 *
 * Every primitive memoized in step_runs under a key (a step, and any other a run records in the
 * same namespace) goes through it: returning a recorded completed row calls `recorded(key)`,
 * starting something not recorded awaits `admit(key)` first. A recorded row that no primitive
 * reports as asked for counts as left over, and trips the guard at the next new one.
 */
export class DeterminismGuard {
  /** Recorded completed steps not asked for yet, in the order the run completed them. */
  private readonly unconsumed: Set<string>;
  private settling: Promise<void> | undefined;
  private divergence: NonDeterminismError | undefined;

  constructor(
    private readonly taskId: string,
    private readonly workflowName: string,
    memos: ReadonlyMap<string, StepMemo>,
  ) {
    this.unconsumed = new Set(
      [...memos.values()]
        .filter((memo) => (memo.status === 'completed' || isRecordedWait(memo)) && !isPatchMarker(memo.stepKey))
        .sort((a, b) => (a.completionSeq ?? Number.MAX_SAFE_INTEGER) - (b.completionSeq ?? Number.MAX_SAFE_INTEGER))
        .map((memo) => memo.stepKey),
    );
  }

  /** Recorded completed steps remain that the code has not asked for yet: the run is replaying its recorded path. */
  get replaying(): boolean {
    return this.unconsumed.size > 0;
  }

  /** The NonDeterminismError once the paths diverged; the run must stop and be held. */
  get diverged(): NonDeterminismError | undefined {
    return this.divergence;
  }

  /** The code asked for a recorded completed step. @throws NonDeterminismError once the run diverged */
  recorded(key: string): void {
    if (this.divergence) throw this.divergence;
    this.unconsumed.delete(key);
  }

  /**
   * A step that was never completed is about to start. Undefined when it may start at once (the
   * common case: nothing recorded is left); else a promise that resolves when it may, or rejects
   * with the NonDeterminismError.
   */
  admit(key: string): Promise<void> | undefined {
    if (this.divergence) return Promise.reject(this.divergence);
    if (this.unconsumed.size === 0) return undefined;
    this.settling ??= this.settle();
    return this.settling.then(() => {
      if (this.divergence) throw this.divergence;
      if (this.unconsumed.size > 0) throw this.diverge(key);
    });
  }

  /** The run returned: a recorded step it never asked for is a divergence. */
  finish(): NonDeterminismError | undefined {
    if (!this.divergence && this.unconsumed.size > 0) this.diverge(null);
    return this.divergence;
  }

  /** Records a divergence found elsewhere (a patch retired while the run recorded it as false). */
  divergeAt(recordedStep: string, requestedStep: string | null): NonDeterminismError {
    this.divergence ??= new NonDeterminismError(this.taskId, this.workflowName, recordedStep, requestedStep);
    return this.divergence;
  }

  private diverge(requestedStep: string | null): NonDeterminismError {
    return this.divergeAt(this.unconsumed.values().next().value!, requestedStep);
  }

  private async settle(): Promise<void> {
    for (let round = 0; round < MAX_SETTLE_ROUNDS && this.unconsumed.size > 0; round++) {
      const before = this.unconsumed.size;
      await nextMacrotask();
      if (this.unconsumed.size === before) break;
    }
    this.settling = undefined;
  }
}

/**
 * A wait the run recorded besides a completed one: its failure as its outcome (a signal's
 * timeout, a child's failure, replayed as an output is), or a child it started and waits for
 * (the run has been there: a new primitive before it would start a second child).
 */
function isRecordedWait(memo: StepMemo): boolean {
  if (memo.status === 'failed') return memo.kind === 'signal' || memo.kind === 'child';
  return memo.status === 'waiting' && memo.kind === 'child';
}
