import { INestApplicationContext, Logger, LoggerService, LogLevel } from '@nestjs/common';
import { HttpAdapterHost, NestFactory } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';
import { AddressInfo } from 'node:net';
import { DuraflowExceptionFilter } from '@duraflow/nestjs';
import { AppModule } from './app.module';
import { EngineConfig } from './config/engine.config';
import { redactPassword } from './config/redact-password';
import { EmbeddedDatabase } from './db/embedded-database';
import { runMigrations } from './db/migrate';
import { DURAFLOW_GRPC_PACKAGE, duraflowGrpcOptions } from './grpc/grpc.options';
import { allowedHostsMiddleware } from './http/allowed-hosts';
import { ApiExceptionFilter } from './http/api-exception.filter';
import { requestBodyLimit, useJsonBody } from './http/json-body';
import { createValidationPipe } from './http/validation.pipe';
import { connectableHost, hostPort, isLoopback } from './net/listen-address';
import { checkPortsFree, explainListenFailure } from './net/port-check';

export interface EngineStartOptions {
  /** Nest's logger setting; the engine's own lines go through Nest's Logger too. */
  logger?: LoggerService | LogLevel[] | false;
}

export interface RunningEngine {
  /** The Nest application (an application context on a worker-only node). */
  app: INestApplicationContext;
  /** A URL that reaches the HTTP API from this machine, e.g. http://127.0.0.1:3000; undefined on a worker-only node. */
  httpUrl: string | undefined;
  /** e.g. 127.0.0.1:50051, reachable from this machine; undefined on a worker-only node. */
  grpcAddress: string | undefined;
  databaseUrl: string;
  /** Set when DATABASE_URL was unset. */
  embeddedDatabase: EmbeddedDatabase | undefined;
  /** Closes the application (workers hand back what they run), then stops the embedded database. */
  close(): Promise<void>;
}

/**
 * Starts the engine: checks that its ports are free, starts the database (DATABASE_URL, or
 * the embedded one) and its migrations, then the application with its HTTP and gRPC servers.
 */
export async function startEngine(config: EngineConfig, options: EngineStartOptions = {}): Promise<RunningEngine> {
  const logger = new Logger('Engine');
  const ports = [
    { variable: 'PORT', port: config.port },
    { variable: 'GRPC_PORT', port: config.grpcPort },
  ];
  // A busy port is found in milliseconds; the embedded database takes seconds to start and stop.
  if (config.http) await checkPortsFree(config.host, ports);
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
    let listening = 'Duraflow engine running worker-only (DURAFLOW_HTTP=false)';
    if (config.http) {
      const http = await NestFactory.create<NestExpressApplication>(module, {
        ...nestOptions,
        bodyParser: false,
        forceCloseConnections: true,
      });
      app = http;
      // Before any route: X-Forwarded-* believed only from the proxies named, then the Host check.
      http.set('trust proxy', config.trustProxy);
      http.use(allowedHostsMiddleware(config));
      const bodyLimit = requestBodyLimit(config.maxInputBytes);
      useJsonBody(http, bodyLimit, config.callbacks?.path);
      http.useGlobalPipes(createValidationPipe());
      const adapterHost = http.get(HttpAdapterHost);
      // The last one registered is asked first: Duraflow's typed errors, then everything else.
      http.useGlobalFilters(new ApiExceptionFilter(adapterHost), new DuraflowExceptionFilter(adapterHost));
      http.connectMicroservice(duraflowGrpcOptions(config.grpcPort, config.host, bodyLimit), { inheritAppConfig: true });
      await http.startAllMicroservices().catch((error: unknown) => {
        throw explainGrpcBindFailure(error, config.host, ports[1]);
      });
      await http.listen(config.port, config.host).catch((error: unknown) => {
        throw explainListenFailure(error, config.host, ports[0]);
      });
      const bound = http.getHttpServer().address() as AddressInfo;
      httpUrl = `http://${hostPort(connectableHost(bound.address), bound.port)}`;
      grpcAddress = hostPort(connectableHost(bound.address), config.grpcPort);
      listening =
        `Duraflow engine listening: HTTP http://${hostPort(bound.address, bound.port)}, ` +
        `gRPC ${hostPort(bound.address, config.grpcPort)} (${DURAFLOW_GRPC_PACKAGE}.Duraflow)`;
      if (!isLoopback(bound.address) && !config.apiKey) {
        logger.warn(
          `HOST=${config.host}: the API is reachable from other machines and DURAFLOW_API_KEY is not set, so anyone who ` +
            `reaches it can submit, cancel and retry. Set DURAFLOW_API_KEY, or HOST=127.0.0.1 to serve this machine only.`,
        );
      }
    } else {
      app = await NestFactory.createApplicationContext(module, nestOptions);
      await app.init();
    }
    const where = embeddedDatabase ? `embedded PostgreSQL ${embeddedDatabase.describe()}` : redactPassword(databaseUrl);
    logger.log(
      listening +
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

/** grpc-js reports a failed bind as "No address added out of total 1 resolved", the reason inside. */
function explainGrpcBindFailure(error: unknown, host: string, port: { variable: string; port: number }): unknown {
  const message = error instanceof Error ? error.message : String(error);
  const code = /EADDRINUSE|EACCES|EADDRNOTAVAIL|ENOTFOUND|EAI_AGAIN/.exec(message)?.[0];
  return code ? explainListenFailure(Object.assign(new Error(message), { code }), host, port) : error;
}
