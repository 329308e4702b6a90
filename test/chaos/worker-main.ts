/**
 * The entry of a chaos worker process: a small Nest app with DuraflowModule and the chosen
 * scenarios' workflows, started by test/support/child-process.ts (`fork` with the swc require
 * hook) and driven over IPC. Configured by CHAOS_WORKER_CONFIG (JSON, see protocol.ts).
 */
import 'reflect-metadata';
import { DynamicModule, INestApplicationContext, Logger, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import * as duraflow from '@duraflow/nestjs';
import { DURAFLOW_ENTITIES, DuraflowModule } from '@duraflow/nestjs';
import { ChaosEffects } from './effects';
import { CHAOS_WORKER_CONFIG_ENV, ChaosChildMessage, ChaosRequest, ChaosWorkerConfig } from './protocol';
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

function readConfig(): ChaosWorkerConfig {
  const raw = process.env[CHAOS_WORKER_CONFIG_ENV];
  if (!raw) throw new Error(`${CHAOS_WORKER_CONFIG_ENV} is not set: start this file with startWorkerProcess()`);
  return JSON.parse(raw) as ChaosWorkerConfig;
}

function send(message: ChaosChildMessage): void {
  process.send?.(message, (error: Error | null) => {
    if (error) logger.error(`Could not send ${message.type} to the test: ${error.message}`);
  });
}

/** Runs `service.method(...args)` on a provider of the app, `service` naming a class the library exports. */
async function answer(app: INestApplicationContext, id: number, request: ChaosRequest): Promise<void> {
  try {
    if (request.type !== 'call') throw new Error(`Unknown request type "${String((request as { type?: unknown }).type)}"`);
    const token = (duraflow as Record<string, unknown>)[request.service];
    if (typeof token !== 'function') throw new Error(`@duraflow/nestjs exports no class "${request.service}"`);
    const service = app.get(token as new (...args: never[]) => Record<string, unknown>, { strict: false });
    const method = service[request.method];
    if (typeof method !== 'function') throw new Error(`${request.service} has no method "${request.method}"`);
    const value: unknown = await method.apply(service, request.args ?? []);
    send({ type: 'reply', id, ok: true, value });
  } catch (error) {
    const { name, message, stack } = error instanceof Error ? error : new Error(String(error));
    send({ type: 'reply', id, ok: false, error: { name, message, stack } });
  }
}

async function main(): Promise<void> {
  const config = readConfig();
  const effects = new ChaosEffects(config.databaseUrl, config.duraflow.workerId);
  const app = await NestFactory.createApplicationContext(ChaosWorkerModule.register(config, effects), {
    logger: ['log', 'warn', 'error', 'fatal'],
    abortOnError: false,
  });
  // createApplicationContext ran the bootstrap hooks: the worker is claiming by now.
  app.enableShutdownHooks();
  process.on('message', (message: ChaosRequest & { id: number }) => void answer(app, message.id, message));
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
// The test process went away: never outlive it.
process.on('disconnect', () => process.exit(1));

main().catch((error: unknown) => {
  logger.fatal(`Boot failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exit(1);
});
