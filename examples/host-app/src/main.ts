import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';

async function bootstrap() {
  const app = await NestFactory.create(AppModule);
  // SIGTERM and SIGINT close the app, so the Duraflow worker hands its running tasks back.
  app.enableShutdownHooks();
  await app.listen(process.env.PORT ?? 3000, '127.0.0.1');
  new Logger('HostApp').log(`Host app listening on ${await app.getUrl()}`);
}
void bootstrap();
