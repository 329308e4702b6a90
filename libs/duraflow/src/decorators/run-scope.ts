import { AsyncLocalStorage } from 'node:async_hooks';
import { StepContext, StepOptions } from '../domain/workflow-context';

/** What the code of one workflow run can see: lets @Step methods find the run they belong to. */
export interface RunScope {
  runStep<T>(key: string, fn: (step: StepContext) => T | Promise<T>, options?: StepOptions): Promise<T>;
  /** Set while a step body runs. */
  step?: { key: string; context: StepContext };
}

export const runScopeStorage = new AsyncLocalStorage<RunScope>();

/**
 * The `{ signal, attempt, effectKey }` of the step whose body is running. A @Step method reads
 * its AbortSignal and its effect key here, since its own arguments are the caller's.
 */
export function currentStepContext(): StepContext | undefined {
  return runScopeStorage.getStore()?.step?.context;
}
