/**
 * The entry of a bench worker process: a Nest app with TypeORM, ScheduleModule and
 * DuraflowModule running the bench workflows, forked by worker-process.ts under the swc
 * require hook and driven over IPC. Configured by DURAFLOW_BENCH_WORKER_CONFIG (JSON).
 */
import 'reflect-metadata';
import { DynamicModule, INestApplicationContext, Logger, Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DURAFLOW_ENTITIES, DuraflowModule, ReaperService, WorkerService } from '@duraflow/nestjs';
import { readWorkerConfig, runWorkerEntry, serveWorkerApp } from '../test/support/worker-ipc';
import { installQueryCounter, queryCounts } from './query-counter';
import { BENCH_WORKER_CONFIG_ENV, BenchRequest, BenchWorkerConfig, BenchWorkerStats } from './protocol';
import { WORKER_WORKFLOWS } from './workflows';

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
        DuraflowModule.forRoot({ ...config.duraflow, workflows: WORKER_WORKFLOWS }),
      ],
    };
  }
}

async function handle(app: INestApplicationContext, request: BenchRequest): Promise<unknown> {
  const worker = app.get(WorkerService);
  switch (request.type) {
    case 'start-worker':
      return worker.start();
    case 'stop-worker':
      return worker.stop();
    case 'stats': {
      const { state, claimed, completed, failed, running } = worker.stats();
      return { state, claimed, completed, failed, running } satisfies BenchWorkerStats;
    }
    case 'memory': {
      const gc = (globalThis as { gc?: () => void }).gc;
      if (request.gc) {
        if (!gc) throw new Error('memory with gc: start the worker process with --expose-gc');
        gc();
      }
      return process.memoryUsage();
    }
    case 'is-leader':
      return app.get(ReaperService).isLeader();
    case 'query-counts':
      return queryCounts();
    case 'cpu':
      return process.cpuUsage();
    default:
      throw new Error(`Unknown request ${JSON.stringify(request)}`);
  }
}

async function main(): Promise<void> {
  const config = readWorkerConfig<BenchWorkerConfig>(BENCH_WORKER_CONFIG_ENV, 'through bench/worker-process.ts');
  await serveWorkerApp<BenchRequest>({
    module: BenchWorkerModule.register(config),
    logger,
    parent: 'bench',
    workerId: config.duraflow.workerId,
    handle,
  });
}

runWorkerEntry(logger, main);
