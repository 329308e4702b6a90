import { STEP_METADATA } from '../domain/duraflow.constants';
import { runScopeStorage } from './run-scope';
import { StepOptions } from '../domain/workflow-context';

export interface StepMetadata {
  key: string;
  options: StepOptions;
}

/**
 * Makes a method a memoized step. Called inside a workflow run, it goes through the same
 * runner as `ctx.step.run(key, ...)`: executed once per task, its output checkpointed and
 * returned from the checkpoint afterwards (so it always returns a Promise there). Called
 * outside a run it is a plain method. Its AbortSignal is `currentStepContext().signal`.
 */
export function Step(key: string, options: StepOptions = {}): MethodDecorator {
  return (target, propertyKey, descriptor: PropertyDescriptor) => {
    const original = descriptor.value;
    if (typeof original !== 'function') {
      throw new TypeError(`@Step("${key}") must decorate a method, not ${String(propertyKey)}.`);
    }
    const memoized = function (this: unknown, ...args: unknown[]) {
      const scope = runScopeStorage.getStore();
      if (!scope) return original.apply(this, args);
      return scope.runStep(key, () => original.apply(this, args), options);
    };
    Object.defineProperty(memoized, 'name', { value: original.name });
    Reflect.defineMetadata(STEP_METADATA, { key, options } satisfies StepMetadata, memoized);
    for (const metadataKey of Reflect.getMetadataKeys(original)) {
      Reflect.defineMetadata(metadataKey, Reflect.getMetadata(metadataKey, original), memoized);
    }
    descriptor.value = memoized;
    return descriptor;
  };
}
