import { StepMemo } from '../persistence/step.store';
import { DeterminismGuard } from './determinism-guard';
import { patchMarkerKey } from '../domain/reserved-keys';

/** Where a run's patch answers go: the step runner's fenced checkpoint, or nowhere in a replay. */
export type PatchMarkerWriter = (key: string, patched: boolean) => Promise<void> | void;

/**
 * `ctx.patched(id)` and `ctx.deprecatePatch(id)` of one run.
 *
 * `patched(id)` is true for a run that reaches the patch for the first time on code that has it,
 * false for a run that was already past it before the patch existed: past it means the run is
 * replaying (recorded steps remain that the code has not asked for yet, so the old run went on
 * beyond this point without the patch). The first answer is recorded as the step_runs row
 * `patch:<id>` and returned from then on, after any crash: without it a run that took the new
 * branch and recorded its steps would be "replaying" at the patch on its next recovery. The
 * marker is written before any later step of the run starts (the step waits for it, see
 * `pending`), so no recorded step can follow an unrecorded answer.
 */
export class RunPatches {
  private readonly answers = new Map<string, boolean>();
  private writes: Promise<void> | undefined;

  constructor(
    private readonly memos: ReadonlyMap<string, StepMemo>,
    private readonly guard: DeterminismGuard,
    private readonly writeMarker: PatchMarkerWriter,
  ) {}

  patched(patchId: string): boolean {
    const key = checkedKey(patchId, 'patched');
    const known = this.answers.get(key);
    if (known !== undefined) return known;
    const memo = this.memos.get(key);
    if (memo?.status === 'completed') {
      const recorded = memo.output === true;
      this.answers.set(key, recorded);
      return recorded;
    }
    const answer = !this.guard.replaying;
    this.answers.set(key, answer);
    const write = Promise.resolve(this.writeMarker(key, answer));
    // Observed at once: a failure is surfaced through `pending`, never as an unhandled rejection.
    write.catch(() => undefined);
    const writes = this.writes ? this.writes.then(() => write) : write;
    this.writes = writes;
    // Landed: the next step need not wait. Failed: it stays, so the next step awaits it and fails
    // (until then nobody may be waiting, hence the catch).
    writes.then(
      () => {
        if (this.writes === writes) this.writes = undefined;
      },
      () => undefined,
    );
    return answer;
  }

  /**
   * The patch's old branch is gone from the code: a run that recorded it as false needed that
   * branch, so it diverged (NonDeterminismError, the task is held). Others go on; nothing is recorded.
   */
  deprecatePatch(patchId: string): void {
    const key = checkedKey(patchId, 'deprecatePatch');
    const memo = this.memos.get(key);
    if (memo?.status === 'completed' && memo.output !== true) throw this.guard.divergeAt(key, `${key} (deprecated)`);
  }

  /** The marker writes not yet known to have landed: a new step waits for them. Undefined when none. */
  get pending(): Promise<void> | undefined {
    return this.writes;
  }
}

function checkedKey(patchId: unknown, method: string): string {
  if (typeof patchId !== 'string' || patchId.length === 0 || patchId.length > 240) {
    throw new TypeError(`ctx.${method}(id): id must be a non-empty string of at most 240 characters, got ${JSON.stringify(patchId)}.`);
  }
  return patchMarkerKey(patchId);
}
