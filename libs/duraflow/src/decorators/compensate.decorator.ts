import { SetMetadata } from '@nestjs/common';
import { COMPENSATE_METADATA } from '../domain/duraflow.constants';
import { StepOptions } from '../domain/workflow-context';

export interface CompensateMetadata {
  stepKey: string;
  /** Timeout, retries and backoff of this compensation (over the workflow's and the module's). */
  options?: StepOptions;
}

/**
 * Marks a method as the undo of step `stepKey` of the same workflow class. It receives the
 * output saved for that step when the step completed (after a restart as well) and a
 * CompensationContext; it runs when a later step fails for good, in reverse completion order.
 */
export const Compensate = (stepKey: string, options?: StepOptions): MethodDecorator =>
  SetMetadata(COMPENSATE_METADATA, { stepKey, options } satisfies CompensateMetadata);
