import { DynamicModule, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { WorkflowMetadataAccessor } from './discovery/workflow-metadata.accessor';
import { WorkflowExplorer } from './discovery/workflow.explorer';
import { WorkflowRegistry } from './discovery/workflow.registry';
import { RESOLVED_DURAFLOW_OPTIONS } from './duraflow.constants';
import { DURAFLOW_MODULE_OPTIONS, DURAFLOW_OPTIONS_TYPE, DuraflowConfigurableModule } from './duraflow.module-definition';
import { DuraflowModuleOptions, resolveDuraflowOptions } from './duraflow.options';
import { CheckpointBatcher } from './execution/checkpoint-batcher';
import { CompletionBatcher } from './execution/completion-batcher';
import { LeaseHeartbeat } from './background/lease-heartbeat';
import { ReaperLoop } from './background/reaper-loop';
import { RetentionSweeper } from './background/retention-sweeper';
import { WorkerLoop } from './background/worker-loop';
import { TaskLeases } from './lease/task-leases';
import { ShutdownHooksCheck } from './lifecycle/shutdown-hooks.check';
import { SagaExecutor } from './execution/saga-executor';
import { TaskExecutor } from './execution/task-executor';
import { TaskNotifications } from './notifications/task-notifications';
import { DeadLetterStore } from './persistence/dead-letter.store';
import { DuraflowDatabase } from './persistence/duraflow-database';
import { StepStore } from './persistence/step.store';
import { TaskStore } from './persistence/task.store';
import { ReaperService } from './services/reaper.service';
import { SagaService } from './services/saga.service';
import { WorkerService } from './services/worker.service';
import { WorkflowService } from './services/workflow.service';

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
    WorkflowMetadataAccessor,
    WorkflowRegistry,
    WorkflowExplorer,
    DuraflowDatabase,
    TaskStore,
    StepStore,
    DeadLetterStore,
    TaskNotifications,
    TaskLeases,
    LeaseHeartbeat,
    CompletionBatcher,
    CheckpointBatcher,
    SagaExecutor,
    TaskExecutor,
    WorkerLoop,
    ReaperLoop,
    RetentionSweeper,
    WorkflowService,
    WorkerService,
    ReaperService,
    SagaService,
    ShutdownHooksCheck,
  ],
  exports: [WorkflowService, WorkerService, ReaperService, SagaService, WorkflowRegistry],
})
export class DuraflowModule extends DuraflowConfigurableModule {
  /** `forRoot()` with every default is a working setup: a worker, no Redis, decorated workflows only. */
  static override forRoot(options: typeof DURAFLOW_OPTIONS_TYPE = {}): DynamicModule {
    return super.forRoot(options);
  }
}
