// The public API of @duraflow/nestjs. What an application needs to define, run, operate and
// observe workflows; optional parts have subpaths of their own: `@duraflow/nestjs/dashboard` (the
// dashboard's options and helpers) and `@duraflow/nestjs/replay` (the replay check as a function).

// The module and its options.
export { DuraflowModule } from './duraflow.module';
export {
  DuraflowModuleOptions,
  DuraflowWorkerOptions,
  DuraflowBackpressureOptions,
  DuraflowReaperOptions,
  DuraflowRedisOptions,
  DuraflowRetentionOptions,
  DuraflowSignalOptions,
  DuraflowPooler,
  DURAFLOW_DEFAULTS,
  defaultLeaseConfirmAfterMs,
} from './config/duraflow.options';
export { DuraflowMetricsOptions, DuraflowMetricsRegistry, DEFAULT_METRICS_PREFIX } from './config/metrics.options';

// Defining workflows.
export { Workflow, Step, Compensate } from './decorators';
export { workflow } from './decorators/workflow';
export { currentStepContext } from './decorators/run-scope';
export {
  WorkflowContext,
  StepContext,
  StepOptions,
  BackoffOptions,
  SignalWaitOptions,
  ChildWorkflowOptions,
  RunLogger,
} from './domain/workflow-context';
export {
  WorkflowOptions,
  FunctionalWorkflowDefinition,
  FunctionalWorkflowOptions,
  CompensationFn,
  CompensationContext,
  UnknownInputProperties,
} from './domain/workflow-definition';
export { FlowControlOptions, RateLimitOptions, FlowLimitStats } from './domain/flow-control';
export { ScheduleDefinition, WorkflowScheduleOptions, ScheduleInfo } from './domain/schedule-options';
export {
  WorkflowEventOptions,
  DebounceOptions,
  BatchOptions,
  EventGroupKey,
  EventDelivery,
  EventRefusal,
  PublishResult,
  PublishedEventInfo,
  OpenEventGroup,
  OWN_EVENT_NAMES,
} from './domain/event-options';
export { PublishOptions } from './events/event-publisher';
export { ListEventsOptions } from './events/event-reader';
export { DuraflowEventOptions } from './config/event.options';

// What an application injects, and what its methods take and give.
export { WorkflowService } from './services/workflow.service';
export { SubmitOptions, SubmitResult } from './services/workflows/task-submitter';
export { ListSignalsOptions, ListTasksOptions, SignalPage, TaskPage } from './services/workflows/task-reader';
export { GetLogsOptions, RunLogLine, RunLogPage } from './services/workflows/run-log-reader';
export { RunLogLevel } from './persistence/run-log.store';
export { DuraflowRunLogOptions } from './config/run-log.options';
export { CallbackHandle, CallbackOptions } from './domain/workflow-context';
export { CallbackInfo, CallbackReceipt } from './services/workflows/task-callbacks';
export { TaskCallback } from './persistence/callback.store';
export { DuraflowCallbackOptions } from './config/callbacks.options';
export { DuraflowCallbacksModule } from './http/callbacks.module';
export { GetEventOptions, ReadStreamOptions, StreamChunk } from './services/workflows/run-talk-reader';
export { DuraflowStreamOptions } from './config/stream.options';
export { streamEvents, StreamEventsOptions, STREAM_END_EVENT } from './http/stream-events';
export { PayloadCodec, PayloadContext, PayloadField } from './domain/payload-codec';
export { aesGcmCodec, AesGcmCodec, AesGcmCodecOptions, AesGcmEnvelope, isAesGcmEnvelope } from './codec/aes-gcm-codec';
export { codecFromEnv } from './codec/codec-from-env';
export { CancelOptions, SignalReceipt } from './services/workflows/task-control';
export { BulkTaskFilter, BulkOptions, BulkCancelOptions, BulkResult } from './domain/bulk-operations';
export { ForkOptions, ForkResult } from './services/workflows/task-operations';
export { WaitForOptions } from './services/workflows/task-waiter';
export { WorkflowInsights, WorkflowDescription } from './services/workflows/workflow-insights';
export {
  OverviewInterval,
  OverviewWindow,
  TaskOutcomeCounts,
  TaskOverview,
  WorkflowOverview,
  WorkflowStepStats,
  WorkflowSubscription,
  WorkflowVersionStatus,
} from './domain/task-overview';
export { WorkerService } from './services/worker.service';
export { WorkerStats, WorkerState } from './domain/worker-stats';
export { ReaperService } from './services/reaper.service';
export { ReapResult } from './domain/reap-result';
export { RetentionStats, RetentionCounts } from './domain/retention-stats';
export { SagaService, ListDeadLettersOptions, DeadLetterPage, DeadLetterRetryResult } from './services/saga.service';
export { TaskSignal } from './persistence/signal.store';

// A task, its steps and its dead letters, as stored and as read.
export { TaskStatus, TERMINAL_STATUSES, isTerminalStatus } from './domain/task-status';
export {
  AgentTask,
  TaskError,
  TaskHistoryEntry,
  TaskRetriedEntry,
  TaskForkedEntry,
  ForkOrigin,
  StepRun,
  DeadLetter,
  DURAFLOW_ENTITIES,
} from './domain/entities';
export { JsonPreview, StepSummary, StepSummaryOptions, TaskCountFilter, TaskCounts, TaskProgress } from './domain/task-summaries';
export { DURAFLOW_MIGRATIONS } from './migrations';
export { runDuraflowMigrations } from './migrations/run-migrations';

// Errors (each with a stable `code`), and what they mean to an API.
export * from './domain/errors';
export {
  DURAFLOW_EXCEPTION_FILTER_OPTIONS,
  DuraflowExceptionFilter,
  DuraflowExceptionFilterOptions,
  DuraflowErrorResponse,
  duraflowErrorResponse,
} from './http/duraflow-exception.filter';
export { duraflowErrorStatus, DuraflowErrorStatus } from './domain/errors/error-status';
export { isTransientDatabaseError } from './persistence/transient-error';

// The operator's view.
export { DuraflowDashboardModule, DuraflowDashboardOptions } from './dashboard';
export { DuraflowMetrics } from './observability/metrics';
export { DuraflowLogRecord } from './observability/duraflow-logger';
export { DURAFLOW_TRACER_NAME } from './observability/tracer-name';

// The limits the library checks, for APIs that check them first.
export {
  WORKFLOW_NAME_PATTERN,
  SIGNAL_NAME_PATTERN,
  UUID_PATTERN,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  MAX_LIST_LIMIT,
  MAX_JSON_DEPTH,
  REAPER_INTERVAL_NAME,
} from './domain/duraflow.constants';
export { jsonPathDeeperThan } from './util/json';
export { MAX_TAGS, MAX_TAG_KEY_LENGTH, MAX_TAG_VALUE_LENGTH, parseTagPairs } from './validation/tags';
