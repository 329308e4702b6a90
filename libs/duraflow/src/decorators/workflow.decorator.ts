import { applyDecorators, Injectable, SetMetadata } from '@nestjs/common';
import { WORKFLOW_METADATA } from '../domain/duraflow.constants';
import { WorkflowOptions } from '../domain/workflow-definition';

export interface WorkflowMetadata {
  name: string;
  options: WorkflowOptions;
}

/**
 * Marks a provider as the workflow `name`. Its `run(ctx)` method is the entry point; its
 * @Step methods are memoized steps and its @Compensate methods undo them. Register the
 * class in a module's `providers` like any service: constructor injection works.
 */
export function Workflow(name: string, options: WorkflowOptions = {}): ClassDecorator {
  return applyDecorators(Injectable(), SetMetadata(WORKFLOW_METADATA, { name, options } satisfies WorkflowMetadata));
}
