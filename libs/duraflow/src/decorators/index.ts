export { Workflow, WorkflowMetadata } from './workflow.decorator';
export { Step, StepMetadata } from './step.decorator';
export { Compensate, CompensateMetadata } from './compensate.decorator';
