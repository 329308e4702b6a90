/**
 * The entry of a bench worker process: a Nest app with TypeORM, ScheduleModule and
 * DuraflowModule running the bench workflows, forked by worker-process.ts under the swc
 * require hook and driven over IPC (test/support/worker-ipc.ts). Configured as protocol.ts says.
 */
import 'reflect-metadata';
import { DynamicModule, Logger, Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DURAFLOW_ENTITIES, DuraflowModule } from '@duraflow/nestjs';
import { readWorkerConfig, runWorkerEntry, serveWorkerApp } from '../test/support/worker-ipc';
import { installQueryCounter, queryCounts } from './query-counter';
import { BenchRequest, BenchWorkerConfig } from './protocol';
import { FLOW_WORKFLOWS, WORKER_WORKFLOWS } from './workflows';

installQueryCounter();
const logger = new Logger('BenchWorker');

@Module({})
class BenchWorkerModule {
  static register(config: BenchWorkerConfig): DynamicModule {
    return {
      module: BenchWorkerModule,
      imports: [
        ScheduleModule.forRoot(),
        TypeOrmModule.forRoot({ type: 'postgres', url: config.databaseUrl, entities: [...DURAFLOW_ENTITIES] }),
        DuraflowModule.forRoot({
          ...config.duraflow,
          workflows: config.flowWorkflow ? [FLOW_WORKFLOWS[config.flowWorkflow]] : WORKER_WORKFLOWS,
        }),
      ],
    };
  }
}

/** The process-level requests; the services' (start, stop, stats, isLeader) are calls, answered by serveWorkerApp. */
async function handle(_app: unknown, request: BenchRequest): Promise<unknown> {
  switch (request.type) {
    case 'memory': {
      const gc = (globalThis as { gc?: () => void }).gc;
      if (request.gc) {
        if (!gc) throw new Error('memory with gc: start the worker process with --expose-gc');
        gc();
      }
      return process.memoryUsage();
    }
    case 'query-counts':
      return queryCounts();
    case 'cpu':
      return process.cpuUsage();
    default:
      throw new Error(`Unknown request ${JSON.stringify(request)}`);
  }
}

async function main(): Promise<void> {
  const config = readWorkerConfig<BenchWorkerConfig>('through bench/worker-process.ts');
  await serveWorkerApp<BenchRequest>({
    module: BenchWorkerModule.register(config),
    logger,
    parent: 'bench',
    workerId: config.duraflow.workerId,
    handle,
  });
}

runWorkerEntry(logger, main);
