import { WorkflowRegistry } from '../discovery/workflow.registry';
import { DuraflowClock } from '../domain/engine-clock';
import { CompensationNotRegisteredError } from '../domain/errors';
import { RunObserver } from '../observability/run-observer';
import { CHILD_COMPENSATION } from '../persistence/lifecycle/start-child';
import { TaskLease } from '../lease/task-lease';
import { CompensationResult, runCompensation } from './compensation';

/** The step to undo: its task, its key, what it saved and the compensation its row names. */
export interface StepToUndo {
  taskId: string;
  workflowName: string;
  stepKey: string;
  output: unknown;
  outputUndefined: boolean;
  compensationFn: string;
}

/**
 * Who undoes a step, and so may run its compensation: a rollback's lease (its claim fences the
 * outcome's write), or a dead letter's claim (dead-letter-claim.ts). Before each attempt of the
 * compensation it is confirmed if old, and the compensation runs only while its signal has not
 * aborted (the lease or claim lost).
 */
export interface UndoAuthority {
  readonly signal: AbortSignal;
  confirmIfOld(): Promise<void>;
}

/** How an undo went: the compensation's result, or for a child's step its rollback's; undefined once the authority was lost. */
export type UndoResult = CompensationResult | undefined;

/** The undo of a child's step (its compensation name is the child marker): the parent's rollback reaching the child, or a retry's check. */
export type ChildUndo = (step: StepToUndo) => Promise<UndoResult>;

/** What `undoStep` is given besides the step. */
export interface UndoCall {
  by: UndoAuthority;
  /** The rollback's lease, whose run's span the undo is observed under (none for a dead letter's retry). */
  lease?: TaskLease;
  /** A dead letter's retry: one attempt, and no new dead letter counted when it fails. */
  deadLetterId?: string;
  /** The engine's clock a compensation's backoff waits on (default the system's). */
  clock?: DuraflowClock;
  /** What undoing a child's step means to this caller. */
  child: ChildUndo;
  registry: WorkflowRegistry;
  observer: RunObserver;
}

/** Whether a step's compensation name is a child's rollback rather than a registered compensation. */
export function isChildStep(compensationFn: string | null): boolean {
  return compensationFn === CHILD_COMPENSATION;
}

/**
 * Undoes one step: the one way a compensation is run, for a rollback (saga), a cancel with
 * compensation, a parent's rollback of its finished child, and a dead letter's retry. A child's
 * step is the caller's `child` undo; otherwise the compensation the step's row names (only one
 * its own workflow registers for that very step), with its timeout and retries, the authority
 * confirmed before each attempt, the whole observed (a span and the compensations counter).
 * Resolves with how it went; never writes: the caller records the outcome under its own fence.
 */
export async function undoStep(step: StepToUndo, call: UndoCall): Promise<UndoResult> {
  if (isChildStep(step.compensationFn)) return call.child(step);
  const compensation = call.registry.resolveCompensation(step.workflowName, step.stepKey, step.compensationFn);
  if (!compensation) {
    return { ok: false, error: new CompensationNotRegisteredError(step.compensationFn, step.stepKey, step.workflowName), attempts: 0 };
  }
  const undo = {
    lease: call.lease,
    deadLetterId: call.deadLetterId,
    taskId: step.taskId,
    workflow: step.workflowName,
    stepKey: step.stepKey,
  };
  return call.observer.observeUndo(
    undo,
    () =>
      runCompensation({
        compensation,
        output: step.outputUndefined ? undefined : step.output,
        runId: step.taskId,
        workflowName: step.workflowName,
        stepKey: step.stepKey,
        signal: call.by.signal,
        maxAttempts: call.deadLetterId ? 1 : undefined,
        beforeAttempt: () => call.by.confirmIfOld(),
        clock: call.clock,
      }).catch(() => undefined), // rejects only when the authority was lost
  );
}
