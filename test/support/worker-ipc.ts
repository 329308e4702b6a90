/**
 * What the worker processes that tests and the bench fork have in common (test/fixtures/chaos/worker-main.ts,
 * bench/worker-main.ts): the configuration and messages that cross the process boundary, and the
 * child's side of the IPC channel (its messages, answering requests, the guards of its entry).
 * The parent's side is worker-process.ts.
 */
import type { DynamicModule, INestApplicationContext, Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import * as duraflow from '@duraflow/nestjs';
import type { DuraflowModuleOptions } from '@duraflow/nestjs';

/** The env variable a worker process reads its configuration from (JSON). */
export const WORKER_CONFIG_ENV = 'DURAFLOW_WORKER_PROCESS_CONFIG';

/**
 * DuraflowModule options as they cross the process boundary (JSON): everything but the
 * functional workflows, which the child brings itself.
 */
export type WorkerDuraflowOptions = Omit<DuraflowModuleOptions, 'workflows'>;

/** What a worker process reads from its configuration env variable (JSON). */
export interface WorkerConfig {
  databaseUrl: string;
  duraflow: WorkerDuraflowOptions & { workerId: string };
}

export interface ReadyMessage {
  type: 'ready';
  workerId: string;
  /** From process start to the app bootstrapped (a chaos worker's worker started too), as the child measured it. */
  bootMs: number;
}

export interface ReplyMessage {
  type: 'reply';
  id: number;
  ok: boolean;
  value?: unknown;
  error?: { name: string; message: string; stack?: string };
}

/** Child -> parent. */
export type WorkerChildMessage = ReadyMessage | ReplyMessage;

/** Parent -> child: call `method(...args)` on a provider of the child's app, by its class name. */
export interface CallRequest {
  type: 'call';
  /** A class exported by `@duraflow/nestjs`: 'WorkerService', 'ReaperService', 'WorkflowService', ... */
  service: string;
  method: string;
  args?: unknown[];
}

/** Parent -> child: a request with the id its reply carries. */
export type WithRequestId<R> = R & { id: number };

/** The child's configuration (JSON); `howToStart` completes the error when it is not set. */
export function readWorkerConfig<T extends WorkerConfig>(howToStart: string): T {
  const raw = process.env[WORKER_CONFIG_ENV];
  if (!raw) throw new Error(`${WORKER_CONFIG_ENV} is not set: start this file ${howToStart}`);
  return JSON.parse(raw) as T;
}

/** Runs `service.method(...args)` on a provider of the app, `service` naming a class the library exports. */
export async function callService(app: INestApplicationContext, request: CallRequest): Promise<unknown> {
  const token = (duraflow as Record<string, unknown>)[request.service];
  if (typeof token !== 'function') throw new Error(`@duraflow/nestjs exports no class "${request.service}"`);
  const service = app.get(token as new (...args: never[]) => Record<string, unknown>, { strict: false });
  const method = service[request.method];
  if (typeof method !== 'function') throw new Error(`${request.service} has no method "${request.method}"`);
  return await method.apply(service, request.args ?? []);
}

/** The child's end of the IPC channel to the process that forked it (`parent` names it in logs). */
export class ParentChannel {
  constructor(
    private readonly logger: Logger,
    private readonly parent: string,
  ) {}

  send(message: WorkerChildMessage): void {
    process.send?.(message, (error: Error | null) => {
      if (error) this.logger.error(`Could not send ${message.type} to the ${this.parent}: ${error.message}`);
    });
  }

  /** Tells the parent the app is up, with the time from process start. */
  ready(workerId: string): void {
    this.send({ type: 'ready', workerId, bootMs: Math.round(process.uptime() * 1000) });
  }

  /** Answers every request from the parent with what `handle` resolves to, or the error it fails with. */
  answerRequests<R>(handle: (request: WithRequestId<R>) => Promise<unknown>): void {
    process.on('message', (request: WithRequestId<R>) => {
      handle(request).then(
        (value) => this.send({ type: 'reply', id: request.id, ok: true, value }),
        (error: unknown) => {
          const { name, message, stack } = error instanceof Error ? error : new Error(String(error));
          this.send({ type: 'reply', id: request.id, ok: false, error: { name, message, stack } });
        },
      );
    });
  }
}

export interface WorkerAppOptions<R> {
  /** The worker's root module. */
  module: DynamicModule;
  logger: Logger;
  /** Names the parent in logs: 'test', 'bench'. */
  parent: string;
  workerId: string;
  /** Answers one request of the parent other than `call` (which is answered here). */
  handle?: (app: INestApplicationContext, request: WithRequestId<R>) => Promise<unknown>;
}

/**
 * Boots a worker process's Nest app (createApplicationContext runs its bootstrap hooks) with
 * shutdown hooks (SIGTERM is graceful), then answers the parent's requests and reports ready.
 */
export async function serveWorkerApp<R extends { type: string } = never>(options: WorkerAppOptions<R>): Promise<void> {
  const app = await NestFactory.createApplicationContext(options.module, {
    logger: ['log', 'warn', 'error', 'fatal'],
    abortOnError: false,
  });
  app.enableShutdownHooks();
  const parent = new ParentChannel(options.logger, options.parent);
  parent.answerRequests<R | CallRequest>(async (request) => {
    if (request.type === 'call') return callService(app, request as CallRequest);
    if (!options.handle) throw new Error(`Unknown request ${JSON.stringify(request)}`);
    return options.handle(app, request as WithRequestId<R>);
  });
  parent.ready(options.workerId);
}

/**
 * Runs a worker process's `main`: any uncaught error, a failed boot, or the parent going away
 * (its IPC channel closing) ends the process with code 1, so it never outlives its parent.
 */
export function runWorkerEntry(logger: Logger, main: () => Promise<void>): void {
  process.on('uncaughtException', (error) => {
    logger.fatal(`Uncaught exception: ${error.stack ?? error.message}`);
    process.exit(1);
  });
  process.on('unhandledRejection', (reason) => {
    logger.fatal(`Unhandled rejection: ${reason instanceof Error ? (reason.stack ?? reason.message) : String(reason)}`);
    process.exit(1);
  });
  // The parent went away: never outlive it.
  process.on('disconnect', () => process.exit(1));

  main().catch((error: unknown) => {
    logger.fatal(`Boot failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  });
}
