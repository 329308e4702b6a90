import { Injectable, Type } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { COMPENSATE_METADATA, STEP_METADATA, WORKFLOW_METADATA } from '../domain/duraflow.constants';
import { CompensateMetadata } from '../decorators/compensate.decorator';
import { StepMetadata } from '../decorators/step.decorator';
import { WorkflowMetadata } from '../decorators/workflow.decorator';

/** Typed reads of what @Workflow, @Step and @Compensate wrote. */
@Injectable()
export class WorkflowMetadataAccessor {
  constructor(private readonly reflector: Reflector) {}

  getWorkflowMetadata(target: Type | Function): WorkflowMetadata | undefined {
    return this.reflector.get(WORKFLOW_METADATA, target);
  }

  getStepMetadata(method: Function): StepMetadata | undefined {
    return this.reflector.get(STEP_METADATA, method);
  }

  getCompensateMetadata(method: Function): CompensateMetadata | undefined {
    return this.reflector.get(COMPENSATE_METADATA, method);
  }
}
