import { DynamicModule, Module, Type } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { TerminusModule } from '@nestjs/terminus';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DURAFLOW_ENTITIES, DuraflowModule } from '@duraflow/nestjs';
import { ApiKeyGuard } from './auth/api-key.guard';
import { EngineConfig } from './config/engine.config';
import { ENGINE_CONFIG } from './config/engine-config.token';
import { EngineDashboardModule } from './dashboard/engine-dashboard.module';
import { DuraflowGrpcController } from './grpc/duraflow.grpc-controller';
import { HealthController } from './health/health.controller';
import { RedisHealthIndicator } from './health/redis.health';
import { BulkTasksController } from './http/bulk-tasks.controller';
import { DeadLettersController } from './http/dead-letters.controller';
import { EventsController } from './http/events.controller';
import { engineMetricsOptions } from './metrics/engine-metrics';
import { MetricsController } from './metrics/metrics.controller';
import { LimitsController } from './http/limits.controller';
import { TasksController } from './http/tasks.controller';
import { TaskTalkController } from './http/task-talk.controller';
import { approvalBatchWorkflow } from './workflows/approval-batch.workflow';
import { approvalWorkflow } from './workflows/approval.workflow';
import { approvalLinkWorkflow } from './workflows/approval-link.workflow';
import { bookingWorkflow } from './workflows/booking.workflow';
import { tenantExportWorkflow } from './workflows/tenant-export.workflow';
import { orderPlacedWorkflow } from './workflows/order-placed.workflow';
import { OrderGateway, OrderProcessingWorkflow } from './workflows/order-processing.workflow';

/**
 * The Duraflow engine: the library on `databaseUrl`, the example workflows and, unless
 * it is a worker-only node, the HTTP and gRPC APIs.
 */
@Module({})
export class AppModule {
  static forConfig(config: EngineConfig, databaseUrl: string): DynamicModule {
    const api: { controllers: Type[]; imports: DynamicModule[] } = config.http
      ? {
          controllers: [
            TasksController,
            TaskTalkController,
            BulkTasksController,
            DeadLettersController,
            EventsController,
            LimitsController,
            HealthController,
            MetricsController,
            DuraflowGrpcController,
          ],
          imports: [TerminusModule.forRoot(), EngineDashboardModule.forConfig(config)],
        }
      : { controllers: [], imports: [] };
    return {
      module: AppModule,
      imports: [
        ScheduleModule.forRoot(),
        // min 1: the pool keeps one connection between the idle worker's polls (30 s apart; node-postgres
        // closes an idle connection after 10 s), instead of opening one per poll (a transaction each).
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl, entities: [...DURAFLOW_ENTITIES], extra: { min: 1 } }),
        DuraflowModule.forRoot({
          ...(config.redisUrl ? { redis: { url: config.redisUrl } } : {}),
          pooler: config.pooler,
          ...(config.listenUrl ? { listenUrl: config.listenUrl } : {}),
          worker: {
            enabled: config.worker,
            concurrency: config.concurrency,
            prefetch: config.prefetch,
            pollIntervalMs: config.pollIntervalMs,
            maxIdlePollIntervalMs: config.maxIdlePollIntervalMs,
            shutdownTimeoutMs: config.shutdownTimeoutMs,
            leaseConfirmAfterMs: config.leaseConfirmAfterMs,
            ...(config.nodeId !== undefined ? { nodeId: config.nodeId } : {}),
          },
          maxInputBytes: config.maxInputBytes,
          heartbeatIntervalMs: config.heartbeatIntervalMs,
          reaper: { intervalMs: config.reaperIntervalMs, staleAfterMs: config.staleAfterMs },
          retention: config.retention,
          workflows: [
            bookingWorkflow,
            approvalWorkflow,
            approvalBatchWorkflow,
            tenantExportWorkflow,
            approvalLinkWorkflow,
            orderPlacedWorkflow,
          ],
          metrics: engineMetricsOptions(),
          ...(config.callbacks ? { callbacks: config.callbacks } : {}),
          ...(config.codec ? { codec: config.codec } : {}),
        }),
        ...api.imports,
      ],
      controllers: api.controllers,
      providers: [
        { provide: ENGINE_CONFIG, useValue: config },
        OrderGateway,
        OrderProcessingWorkflow,
        ...(config.http ? [RedisHealthIndicator, ApiKeyGuard, { provide: APP_GUARD, useExisting: ApiKeyGuard }] : []),
      ],
    };
  }
}
