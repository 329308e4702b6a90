import { RunAbortedError } from '../domain/errors';
import { StepContext } from '../domain/workflow-context';
import { TaskLease } from '../lease/task-lease';

/** Where a run is: a step of a workflow, in the run of a claim. */
export interface StepPoint {
  workflow: string;
  step: string;
  taskId: string;
  claimToken: string;
}

/** A step's body, as the workflow's code gives it. */
export type StepBody<T> = (step: StepContext) => T | Promise<T>;

/**
 * The one seam the testing kit (`@duraflow/nestjs/testing`) uses to inject faults into a live
 * run: a step's body replaced (a stub, a failure) and a crash before a step starts or right after
 * its checkpoint landed. In production it is NO_STEP_FAULTS: the body as given, never a crash.
 */
export interface StepFaults {
  /** The body the attempts of this step run. */
  body<T>(at: StepPoint, fn: StepBody<T>): StepBody<T>;
  /** True: the run dies at this point, as a killed process would (nothing after it recorded). */
  crashes(at: StepPoint, when: 'before' | 'after'): boolean;
}

/** The injection token of the StepFaults the live runs use. */
export const DURAFLOW_STEP_FAULTS = Symbol.for('duraflow.stepFaults');

export const NO_STEP_FAULTS: StepFaults = {
  body: (_at, fn) => fn,
  crashes: () => false,
};

/**
 * A run that dies at a crash point: its lease is stopped as a lost one is, so the executor
 * writes nothing more for it (no failure, no release, no outcome); the claim is left for
 * recovery, as a SIGKILL leaves it.
 */
export function crashRun(lease: TaskLease, at: StepPoint, when: 'before' | 'after'): RunAbortedError {
  lease.stop('lease-lost');
  return new RunAbortedError(lease.taskId, `crashed ${when} step "${at.step}" (a fault injected by the testing kit)`);
}
