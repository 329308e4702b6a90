/**
 * The entry of a bench worker process: a Nest app with TypeORM, ScheduleModule and
 * DuraflowModule running the bench workflows, forked by worker-process.ts under the swc
 * require hook and driven over IPC. Configured by DURAFLOW_BENCH_WORKER_CONFIG (JSON).
 */
import 'reflect-metadata';
import { DynamicModule, INestApplicationContext, Logger, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DURAFLOW_ENTITIES, DuraflowModule, ReaperService, WorkerService } from '@duraflow/nestjs';
import { installQueryCounter, queryCounts } from './query-counter';
import { BENCH_WORKER_CONFIG_ENV, BenchChildMessage, BenchRequest, BenchWorkerConfig, BenchWorkerStats } from './protocol';
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

function send(message: BenchChildMessage): void {
  process.send?.(message, (error: Error | null) => {
    if (error) logger.error(`Could not send ${message.type} to the bench: ${error.message}`);
  });
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
  const raw = process.env[BENCH_WORKER_CONFIG_ENV];
  if (!raw) throw new Error(`${BENCH_WORKER_CONFIG_ENV} is not set: start this file through bench/worker-process.ts`);
  const config = JSON.parse(raw) as BenchWorkerConfig;
  const app = await NestFactory.createApplicationContext(BenchWorkerModule.register(config), {
    logger: ['log', 'warn', 'error', 'fatal'],
    abortOnError: false,
  });
  app.enableShutdownHooks();
  process.on('message', (message: BenchRequest & { id: number }) => {
    handle(app, message).then(
      (value) => send({ type: 'reply', id: message.id, ok: true, value }),
      (error: unknown) => {
        const { name, message: text, stack } = error instanceof Error ? error : new Error(String(error));
        send({ type: 'reply', id: message.id, ok: false, error: { name, message: text, stack } });
      },
    );
  });
  send({ type: 'ready', workerId: config.duraflow.workerId, bootMs: Math.round(process.uptime() * 1000) });
}

process.on('uncaughtException', (error) => {
  logger.fatal(`Uncaught exception: ${error.stack ?? error.message}`);
  process.exit(1);
});
process.on('unhandledRejection', (reason) => {
  logger.fatal(`Unhandled rejection: ${reason instanceof Error ? (reason.stack ?? reason.message) : String(reason)}`);
  process.exit(1);
});
// The bench went away: never outlive it.
process.on('disconnect', () => process.exit(1));

main().catch((error: unknown) => {
  logger.fatal(`Boot failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exit(1);
});
