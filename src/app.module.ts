import { DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DURAFLOW_ENTITIES, DuraflowModule } from '@duraflow/nestjs';
import { EngineConfig } from './config/engine.config';
import { DuraflowExceptionFilter } from './http/duraflow-exception.filter';
import { TasksController } from './http/tasks.controller';
import { bookingWorkflow } from './workflows/booking.workflow';
import { OrderGateway, OrderProcessingWorkflow } from './workflows/order-processing.workflow';

/** The Duraflow engine: the library, its HTTP API and the example workflows. */
@Module({})
export class AppModule {
  static forConfig(config: EngineConfig): DynamicModule {
    return {
      module: AppModule,
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: config.databaseUrl, entities: [...DURAFLOW_ENTITIES] }),
        DuraflowModule.forRoot({
          worker: { enabled: config.worker, concurrency: config.concurrency },
          workflows: [bookingWorkflow],
        }),
      ],
      controllers: [TasksController],
      providers: [OrderGateway, OrderProcessingWorkflow, { provide: APP_FILTER, useClass: DuraflowExceptionFilter }],
    };
  }
}
