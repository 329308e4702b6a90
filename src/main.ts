import 'reflect-metadata';
import { Logger, ValidationPipe } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module';
import { loadEngineConfig } from './config/engine.config';
import { runMigrations } from './db/migrate';

async function bootstrap(): Promise<void> {
  const logger = new Logger('Engine');
  const config = loadEngineConfig();
  if (config.migrate) {
    const applied = await runMigrations(config.databaseUrl);
    logger.log(applied.length ? `Applied migrations: ${applied.join(', ')}` : 'Schema is up to date');
  }
  const app = await NestFactory.create(AppModule.forConfig(config));
  app.useGlobalPipes(new ValidationPipe({ transform: true, whitelist: true }));
  app.enableShutdownHooks();
  await app.listen(config.port, '0.0.0.0');
  logger.log(`Duraflow engine listening on http://127.0.0.1:${config.port} (worker ${config.worker ? 'on' : 'off'})`);
}

bootstrap().catch((error: unknown) => {
  new Logger('Engine').error(error instanceof Error ? error.message : String(error));
  process.exit(1);
});
