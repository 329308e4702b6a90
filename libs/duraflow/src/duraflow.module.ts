import { DynamicModule, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { WorkflowMetadataAccessor } from './discovery/workflow-metadata.accessor';
import { WorkflowExplorer } from './discovery/workflow.explorer';
import { WorkflowRegistry } from './discovery/workflow.registry';
import { RESOLVED_DURAFLOW_OPTIONS } from './domain/duraflow.constants';
import { DURAFLOW_MODULE_OPTIONS, DURAFLOW_OPTIONS_TYPE, DuraflowConfigurableModule } from './config/duraflow.module-definition';
import { DuraflowModuleOptions } from './config/duraflow.options';
import { resolveDuraflowOptions } from './config/resolved-options';
import { callbackRoutePath } from './config/callbacks.options';
import { mountCallbacksController } from './http/callbacks.controller';
import { CheckpointBatcher } from './execution/checkpoint-batcher';
import { CompletionBatcher } from './execution/completion-batcher';
import { LeaseHeartbeat } from './background/lease-heartbeat';
import { ReaperLoop } from './background/reaper-loop';
import { WakeUpTimer } from './notifications/wake-up-timer';
import { RetentionSweeper } from './background/retention-sweeper';
import { TaskStatsRollup } from './background/task-stats-rollup';
import { ScheduleControl } from './schedules/schedule-control';
import { WorkflowInsights } from './services/workflows/workflow-insights';
import { WorkerLoop } from './background/worker-loop';
import { NodeIdentity } from './background/node-identity';
import { SignalStore } from './persistence/signal.store';
import { PayloadCoder } from './codec/payload-coder';
import { RunLogStore } from './persistence/run-log.store';
import { RunEventStore } from './persistence/run-event.store';
import { StreamStore } from './persistence/stream.store';
import { RunTalks } from './execution/run-talk';
import { RunTalkReader } from './services/workflows/run-talk-reader';
import { RunTalkOverviews } from './services/workflows/run-talk-overview';
import { CallbackStore } from './persistence/callback.store';
import { TaskCallbacks } from './services/workflows/task-callbacks';
import { TaskTransitions } from './persistence/lifecycle/task-transitions';
import { TaskLeases } from './lease/task-leases';
import { ShutdownHooksCheck } from './background/shutdown-hooks.check';
import { SagaExecutor } from './execution/saga-executor';
import { TaskExecutor } from './execution/task-executor';
import { RunOutcomes } from './execution/run-outcomes';
import { LiveRuns } from './execution/live-run';
import { TaskFactory } from './execution/task-factory';
import { ScheduleReader } from './schedules/schedule-reader';
import { TaskSubmitter } from './services/workflows/task-submitter';
import { TaskReader } from './services/workflows/task-reader';
import { RunLogReader } from './services/workflows/run-log-reader';
import { TaskControl } from './services/workflows/task-control';
import { BulkTaskControl } from './services/workflows/bulk-control';
import { TaskOperations } from './services/workflows/task-operations';
import { TaskMoves } from './services/workflows/task-moves';
import { TaskWaiter } from './services/workflows/task-waiter';
import { TaskNotifications } from './notifications/task-notifications';
import { DeadLetterStore } from './persistence/dead-letter.store';
import { DuraflowDatabase } from './persistence/duraflow-database';
import { StepStore } from './persistence/step.store';
import { TaskStore } from './persistence/task.store';
import { FlowLimitsStore } from './persistence/flow-limits.store';
import { TaskClaimer } from './background/task-claimer';
import { ReaperService } from './services/reaper.service';
import { SagaService } from './services/saga.service';
import { WorkerService } from './services/worker.service';
import { WorkflowService } from './services/workflow.service';
import { SchemaBootCheck } from './services/schema-boot.check';
import { DuraflowMetrics } from './observability/metrics';
import { RunObserver } from './observability/run-observer';
import { ScheduleExplorer } from './schedules/schedule.explorer';
import { ScheduleRegistry } from './schedules/schedule.registry';
import { ScheduleStore } from './schedules/schedule.store';
import { ScheduleTicker } from './schedules/schedule-ticker';
import { EventSubscriptionRegistry } from './events/event-subscription.registry';
import { EventSubscriptionExplorer } from './events/event-subscription.explorer';
import { EventSubscriptionStore } from './events/event-subscription.store';
import { PublishedEventStore } from './events/published-event.store';
import { EventGroupStore } from './events/event-group.store';
import { EventGroupCloser } from './events/event-group-closer';
import { EventPublisher } from './events/event-publisher';
import { EventReader } from './events/event-reader';
import { EventRetention } from './events/event-retention';
import { DURAFLOW_CLOCK } from './domain/engine-clock';
import { SYSTEM_CLOCK } from './util/engine-clock';
import { DURAFLOW_STEP_FAULTS, NO_STEP_FAULTS } from './execution/step-faults';

/**
 * Durable workflows on the host's PostgreSQL. Needs the host's TypeORM DataSource
 * (`TypeOrmModule.forRoot({ type: 'postgres', ... })`); global by default, so
 * WorkflowService and friends inject anywhere.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    {
      provide: RESOLVED_DURAFLOW_OPTIONS,
      inject: [DURAFLOW_MODULE_OPTIONS],
      useFactory: (options: DuraflowModuleOptions) => resolveDuraflowOptions(options),
    },
    // The engine's clock and the step faults: the system clock and none, unless the testing kit overrides them.
    { provide: DURAFLOW_CLOCK, useValue: SYSTEM_CLOCK },
    { provide: DURAFLOW_STEP_FAULTS, useValue: NO_STEP_FAULTS },
    WorkflowMetadataAccessor,
    WorkflowRegistry,
    WorkflowExplorer,
    // After WorkflowExplorer: Nest runs a module's onModuleInit hooks in this order, and a schedule names a registered workflow.
    ScheduleRegistry,
    ScheduleExplorer,
    ScheduleStore,
    ScheduleTicker,
    ScheduleReader,
    // After WorkflowExplorer too: a subscription belongs to a registered workflow.
    EventSubscriptionRegistry,
    EventSubscriptionExplorer,
    EventSubscriptionStore,
    PublishedEventStore,
    EventGroupStore,
    EventGroupCloser,
    EventPublisher,
    EventReader,
    EventRetention,
    ScheduleControl,
    DuraflowDatabase,
    PayloadCoder,
    SchemaBootCheck,
    TaskStore,
    FlowLimitsStore,
    TaskClaimer,
    StepStore,
    DeadLetterStore,
    SignalStore,
    RunLogStore,
    RunEventStore,
    StreamStore,
    RunTalks,
    RunTalkReader,
    RunTalkOverviews,
    CallbackStore,
    TaskCallbacks,
    TaskTransitions,
    TaskFactory,
    WakeUpTimer,
    TaskNotifications,
    TaskLeases,
    LeaseHeartbeat,
    CompletionBatcher,
    CheckpointBatcher,
    SagaExecutor,
    TaskExecutor,
    RunOutcomes,
    LiveRuns,
    WorkerLoop,
    NodeIdentity,
    ReaperLoop,
    RetentionSweeper,
    TaskSubmitter,
    TaskReader,
    RunLogReader,
    TaskControl,
    BulkTaskControl,
    TaskOperations,
    TaskMoves,
    TaskWaiter,
    WorkflowInsights,
    TaskStatsRollup,
    WorkflowService,
    WorkerService,
    ReaperService,
    SagaService,
    ShutdownHooksCheck,
    DuraflowMetrics,
    RunObserver,
  ],
  exports: [
    WorkflowService,
    WorkerService,
    ReaperService,
    SagaService,
    WorkflowRegistry,
    DuraflowMetrics,
    WorkflowInsights,
    RunTalkOverviews,
    // For DuraflowCallbacksModule's route (forRootAsync): the callbacks' options and completions.
    RESOLVED_DURAFLOW_OPTIONS,
    TaskCallbacks,
  ],
})
export class DuraflowModule extends DuraflowConfigurableModule {
  /** `forRoot()` with every default is a working setup: a worker, no Redis, decorated workflows only. */
  static override forRoot(options: typeof DURAFLOW_OPTIONS_TYPE = {}): DynamicModule {
    const module = super.forRoot(options);
    // With callbacks, the route their urls point at (forRootAsync: DuraflowCallbacksModule).
    if (options.callbacks === undefined) return module;
    return { ...module, controllers: [...(module.controllers ?? []), mountCallbacksController(callbackRoutePath(options.callbacks.path))] };
  }
}
