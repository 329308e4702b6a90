import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { EngineConfigError, loadEngineConfig } from './config/engine.config';
import { EmbeddedDatabaseError } from './db/embedded-database';
import { RunningEngine, startEngine } from './engine';
import { ListenError } from './net/port-check';

const logger = new Logger('Engine');

/**
 * One Ctrl-C can arrive twice: the terminal signals its whole foreground group (npm and the
 * engine), and npm forwards its copy to the engine. Signals this close to the first one are
 * the same request; a later one is someone insisting.
 */
const SAME_REQUEST_MS = 1_000;

/**
 * `npm start`: the engine on DATABASE_URL, or on an embedded PostgreSQL in DURAFLOW_DATA_DIR
 * when it is unset. A signal closes the application first (running tasks are handed back),
 * then the embedded database; a second one, a moment later, exits at once.
 */
async function main(): Promise<void> {
  let engine: RunningEngine | undefined;
  let stoppingSince: number | undefined;
  const stop = (signal: NodeJS.Signals) => {
    if (stoppingSince !== undefined && Date.now() - stoppingSince < SAME_REQUEST_MS) return;
    if (!engine || stoppingSince !== undefined) {
      // The exit hook of the embedded database asks a server already spawned to stop.
      logger.warn(`${signal} ${engine ? 'again' : 'during the start'}: exiting now`);
      process.exit(1);
    }
    stoppingSince = Date.now();
    logger.log(`${signal}: shutting down`);
    engine.close().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error(`Shutdown failed: ${error instanceof Error ? error.message : String(error)}`);
        process.exit(1);
      },
    );
  };
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, stop);
  engine = await startEngine(loadEngineConfig());
}

main().catch((error: unknown) => {
  // A bad setting, a busy port or a database that cannot start explains itself; anything else keeps its stack.
  const known = error instanceof EngineConfigError || error instanceof EmbeddedDatabaseError || error instanceof ListenError;
  logger.error(
    known || !(error instanceof Error) ? String(error instanceof Error ? error.message : error) : (error.stack ?? error.message),
  );
  process.exit(1);
});
