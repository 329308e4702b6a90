import { SetMetadata } from '@nestjs/common';
import { COMPENSATE_METADATA } from '../duraflow.constants';

/**
 * Marks a method as the undo of step `stepKey` of the same workflow class. It receives the
 * output saved for that step when the step completed, after a restart as well.
 */
export const Compensate = (stepKey: string): MethodDecorator => SetMetadata(COMPENSATE_METADATA, stepKey);
