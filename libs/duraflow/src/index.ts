export { DuraflowModule } from './duraflow.module';
export { DURAFLOW_MODULE_OPTIONS } from './config/duraflow.module-definition';
export * from './config/duraflow.options';
export {
  DEFAULT_LIST_LIMIT,
  DEFAULT_MAX_JSON_DEPTH,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  MAX_JSON_DEPTH,
  MAX_LIST_LIMIT,
  SIGNAL_NAME_PATTERN,
  UUID_PATTERN,
  WORKFLOW_NAME_PATTERN,
} from './domain/duraflow.constants';
export { jsonPathDeeperThan } from './util/json';
export { Workflow, Step, Compensate, WorkflowMetadata, StepMetadata } from './decorators';
export { workflow } from './decorators/workflow';
export { currentStepContext } from './decorators/run-scope';
export { isTransientDatabaseError } from './persistence/transient-error';
export {
  WorkflowService,
  SubmitOptions,
  SubmitResult,
  ListTasksOptions,
  TaskPage,
  WaitForOptions,
  CancelOptions,
  SignalReceipt,
} from './services/workflow.service';
export { WorkerService, WorkerStats, WorkerState } from './services/worker.service';
export { ReaperService, ReapResult, REAPER_INTERVAL_NAME } from './services/reaper.service';
export * from './leader';
export { SagaService, ListDeadLettersOptions, DeadLetterPage, DeadLetterRetryResult } from './services/saga.service';
export { WorkflowRegistry, RegisteredWorkflow, RegisteredCompensation } from './discovery/workflow.registry';
export * from './domain/entities';
export * from './domain/errors';
export * from './http';
export { TaskStatus, TERMINAL_STATUSES, isTerminalStatus } from './domain/task-status';
export * from './domain/workflow-context';
export * from './domain/workflow-definition';
export { DURAFLOW_MIGRATIONS } from './migrations';
export { runDuraflowMigrations } from './migrations/run-migrations';
export * from './domain/task-summaries';
export * from './dashboard';
export { DuraflowMetrics } from './observability/metrics';
export { DuraflowMetricsOptions, DuraflowMetricsRegistry, DEFAULT_METRICS_PREFIX } from './config/metrics.options';
export { DuraflowLogFields, DuraflowLogRecord } from './observability/duraflow-logger';
export { DURAFLOW_TRACER_NAME } from './observability/tracer-name';
export { replayCheck, exportRecordedRuns, ReplayCheckOptions, ReplayCheckReport, ReplayRunResult } from './replay/replay-check';
export { ReplayOutcome } from './replay/replay-run';
export { RecordedRun, RecordedStep, RecordedRunsFile } from './replay/recorded-run';
export { RecordedRunsQuery } from './replay/read-recorded-runs';
export { ReplayWorkflowSource } from './replay/replay-workflows';
export { ClaimableWorkflow } from './discovery/workflow.registry';
export {
  ScheduleCatchUp,
  ScheduleDefinition,
  ScheduleInfo,
  WorkflowScheduleOptions,
  DEFAULT_MAX_CATCH_UP,
  MAX_CATCH_UP,
  SCHEDULE_NAME_PATTERN,
} from './domain/schedule-options';
export { FlowControlOptions, RateLimitOptions, FlowLimitKind, FlowLimitStats } from './domain/flow-control';
export { MAX_CONCURRENCY_KEY_LENGTH } from './validation/flow-limits';
export { TaskSignal } from './persistence/signal.store';
export { RetentionCounts, RetentionStats } from './domain/retention-stats';
