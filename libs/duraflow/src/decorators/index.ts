export { Workflow, WorkflowMetadata } from './workflow.decorator';
export { Step, StepMetadata } from './step.decorator';
export { Compensate } from './compensate.decorator';
