import { DynamicModule, INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DURAFLOW_ENTITIES, DuraflowModule } from '@duraflow/nestjs';
import { noopWorkflow, PRIMITIVE_WORKFLOWS, recoverWorkflow, RunProbe } from './workflows';

@Module({})
class BenchAppModule {
  static register(databaseUrl: string, probe: RunProbe): DynamicModule {
    return {
      module: BenchAppModule,
      imports: [
        ScheduleModule.forRoot(),
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl, entities: [...DURAFLOW_ENTITIES] }),
        // Production defaults (heartbeat 5 s, poll 500 ms, pool of 10), except that this node
        // starts as a submit-only node (the latency scenarios start its worker) and runs no
        // reaper: the reaper belongs to the worker processes.
        DuraflowModule.forRoot({
          worker: { enabled: false },
          reaper: { enabled: false },
          workflows: [noopWorkflow, recoverWorkflow, probe.workflow, ...PRIMITIVE_WORKFLOWS],
        }),
      ],
    };
  }
}

/** The bench's own Nest app: it submits, and runs the probe workflows whose timing needs one clock. */
export function startBenchApp(databaseUrl: string, probe: RunProbe): Promise<INestApplicationContext> {
  return NestFactory.createApplicationContext(BenchAppModule.register(databaseUrl, probe), {
    logger: ['warn', 'error', 'fatal'],
    abortOnError: false,
  });
}
