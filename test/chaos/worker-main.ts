/**
 * The entry of a chaos worker process: a small Nest app with DuraflowModule and the chosen
 * scenarios' workflows, started by test/support/child-process.ts (`fork` with the swc require
 * hook) and driven over IPC. Configured by CHAOS_WORKER_CONFIG (JSON, see protocol.ts).
 */
import 'reflect-metadata';
import { DynamicModule, INestApplicationContext, Logger, Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import * as duraflow from '@duraflow/nestjs';
import { DURAFLOW_ENTITIES, DuraflowModule } from '@duraflow/nestjs';
import { readWorkerConfig, runWorkerEntry, serveWorkerApp } from '../support/worker-ipc';
import { ChaosEffects } from './effects';
import { CHAOS_WORKER_CONFIG_ENV, ChaosRequest, ChaosWorkerConfig } from './protocol';
import { chaosScenario } from './scenarios';

const logger = new Logger('ChaosWorker');

@Module({})
class ChaosWorkerModule {
  static register(config: ChaosWorkerConfig, effects: ChaosEffects): DynamicModule {
    const scenario = chaosScenario(config.scenarios, effects);
    return {
      module: ChaosWorkerModule,
      imports: [
        ScheduleModule.forRoot(),
        TypeOrmModule.forRoot({
          type: 'postgres',
          url: config.databaseUrl,
          entities: [...DURAFLOW_ENTITIES],
          retryAttempts: 2,
          retryDelay: 500,
        }),
        DuraflowModule.forRoot({ ...config.duraflow, workflows: scenario.workflows }),
      ],
      providers: [{ provide: ChaosEffects, useValue: effects }, ...scenario.providers],
    };
  }
}

/** Runs `service.method(...args)` on a provider of the app, `service` naming a class the library exports. */
async function answer(app: INestApplicationContext, request: ChaosRequest): Promise<unknown> {
  if (request.type !== 'call') throw new Error(`Unknown request type "${String((request as { type?: unknown }).type)}"`);
  const token = (duraflow as Record<string, unknown>)[request.service];
  if (typeof token !== 'function') throw new Error(`@duraflow/nestjs exports no class "${request.service}"`);
  const service = app.get(token as new (...args: never[]) => Record<string, unknown>, { strict: false });
  const method = service[request.method];
  if (typeof method !== 'function') throw new Error(`${request.service} has no method "${request.method}"`);
  return await method.apply(service, request.args ?? []);
}

async function main(): Promise<void> {
  const config = readWorkerConfig<ChaosWorkerConfig>(CHAOS_WORKER_CONFIG_ENV, 'with startWorkerProcess()');
  const effects = new ChaosEffects(config.databaseUrl, config.duraflow.workerId);
  // Ready once the bootstrap hooks ran: the worker is claiming by then.
  await serveWorkerApp<ChaosRequest>({
    module: ChaosWorkerModule.register(config, effects),
    logger,
    parent: 'test',
    workerId: config.duraflow.workerId,
    handle: answer,
  });
}

runWorkerEntry(logger, main);
