export { DuraflowModule } from './duraflow.module';
export { DURAFLOW_MODULE_OPTIONS } from './duraflow.module-definition';
export * from './duraflow.options';
export {
  DEFAULT_LIST_LIMIT,
  DEFAULT_MAX_JSON_DEPTH,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  MAX_JSON_DEPTH,
  MAX_LIST_LIMIT,
  UUID_PATTERN,
  WORKFLOW_NAME_PATTERN,
} from './duraflow.constants';
export { jsonPathDeeperThan } from './util/json';
export { Workflow, Step, Compensate, WorkflowMetadata, StepMetadata } from './decorators';
export { workflow } from './workflow';
export { currentStepContext } from './execution/run-scope';
export { isTransientDatabaseError } from './persistence/transient-error';
export {
  WorkflowService,
  SubmitOptions,
  SubmitResult,
  ListTasksOptions,
  TaskPage,
  WaitForOptions,
  CancelOptions,
} from './services/workflow.service';
export { WorkerService, WorkerStats, WorkerState } from './services/worker.service';
export { ReaperService, ReapResult, REAPER_INTERVAL_NAME } from './services/reaper.service';
export * from './leader';
export { SagaService, ListDeadLettersOptions, DeadLetterPage, DeadLetterRetryResult } from './services/saga.service';
export { WorkflowRegistry, RegisteredWorkflow, RegisteredCompensation } from './discovery/workflow.registry';
export * from './entities';
export * from './errors';
export * from './http';
export { TaskStatus, TERMINAL_STATUSES, isTerminalStatus } from './interfaces/task-status';
export * from './interfaces/workflow-context';
export * from './interfaces/workflow-definition';
export { UnknownInputProperties } from './validation/dto-input';
export { DURAFLOW_MIGRATIONS } from './migrations';
export { runDuraflowMigrations } from './migrations/run-migrations';
export * from './interfaces/task-summaries';
export * from './dashboard';
export { RetentionCounts, RetentionStats } from './interfaces/retention-stats';
