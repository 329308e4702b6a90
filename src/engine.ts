import { INestApplicationContext, Logger, LoggerService, LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';
import { AddressInfo } from 'node:net';
import { AppModule } from './app.module';
import { EngineConfig, redactPassword } from './config/engine.config';
import { EmbeddedDatabase } from './db/embedded-database';
import { runMigrations } from './db/migrate';
import { DURAFLOW_GRPC_PACKAGE, duraflowGrpcOptions } from './grpc/grpc.options';
import { createValidationPipe } from './http/validation.pipe';

export interface EngineStartOptions {
  /** Nest's logger setting; the engine's own lines go through Nest's Logger too. */
  logger?: LoggerService | LogLevel[] | false;
  /** Interface the HTTP and gRPC servers bind to. Default 0.0.0.0. */
  host?: string;
}

export interface RunningEngine {
  /** The Nest application (an application context on a worker-only node). */
  app: INestApplicationContext;
  /** e.g. http://127.0.0.1:3000; undefined on a worker-only node. */
  httpUrl: string | undefined;
  /** e.g. 127.0.0.1:50051; undefined on a worker-only node. */
  grpcAddress: string | undefined;
  databaseUrl: string;
  /** Set when DATABASE_URL was unset. */
  embeddedDatabase: EmbeddedDatabase | undefined;
  /** Closes the application (workers hand back what they run), then stops the embedded database. */
  close(): Promise<void>;
}

/**
 * Starts the engine: the database (DATABASE_URL, or the embedded one), its migrations,
 * then the application with its HTTP and gRPC servers.
 */
export async function startEngine(config: EngineConfig, options: EngineStartOptions = {}): Promise<RunningEngine> {
  const logger = new Logger('Engine');
  const host = options.host ?? '0.0.0.0';
  const embeddedDatabase = config.databaseUrl
    ? undefined
    : await EmbeddedDatabase.start({ dataDir: config.dataDir, port: config.embeddedDatabasePort, logger });
  const databaseUrl = config.databaseUrl ?? embeddedDatabase!.url;
  let app: INestApplicationContext | undefined;
  try {
    if (config.migrate) {
      const applied = await runMigrations(databaseUrl);
      logger.log(applied.length ? `Applied migrations: ${applied.join(', ')}` : 'Schema is up to date');
    }
    const module = AppModule.forConfig(config, databaseUrl);
    const nestOptions = { logger: options.logger, abortOnError: false };
    let httpUrl: string | undefined;
    let grpcAddress: string | undefined;
    if (config.http) {
      const http = await NestFactory.create<NestExpressApplication>(module, nestOptions);
      app = http;
      http.useGlobalPipes(createValidationPipe());
      http.connectMicroservice(duraflowGrpcOptions(config.grpcPort, host), { inheritAppConfig: true });
      await http.startAllMicroservices();
      await http.listen(config.port, host);
      const { port } = http.getHttpServer().address() as AddressInfo;
      httpUrl = `http://${displayHost(host)}:${port}`;
      grpcAddress = `${displayHost(host)}:${config.grpcPort}`;
    } else {
      app = await NestFactory.createApplicationContext(module, nestOptions);
      await app.init();
    }
    const where = embeddedDatabase ? `embedded PostgreSQL ${embeddedDatabase.url}` : redactPassword(databaseUrl);
    logger.log(
      (httpUrl ? `Duraflow engine listening: HTTP ${httpUrl}, gRPC ${grpcAddress} (${DURAFLOW_GRPC_PACKAGE}.Duraflow)` : 'Duraflow engine running worker-only (DURAFLOW_HTTP=false)') +
        `; database ${where}; worker ${config.worker ? `on (concurrency ${config.concurrency})` : 'off'}` +
        `; leader election ${config.redisUrl ? `through Redis ${redactPassword(config.redisUrl)}` : 'without Redis'}` +
        `; API key ${config.apiKey ? 'required' : 'not required'}`,
    );
    let closing: Promise<void> | undefined;
    const running = app;
    return {
      app: running,
      httpUrl,
      grpcAddress,
      databaseUrl,
      embeddedDatabase,
      close: () =>
        (closing ??= (async () => {
          try {
            await running.close();
          } finally {
            await embeddedDatabase?.stop();
          }
        })()),
    };
  } catch (error) {
    await app?.close().catch(() => undefined);
    await embeddedDatabase?.stop().catch(() => undefined);
    throw error;
  }
}

function displayHost(host: string): string {
  return host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
}

