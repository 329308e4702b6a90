import { DynamicModule, ModuleMetadata, Provider, Type } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { DURAFLOW_ENTITIES, DuraflowModule, DuraflowModuleOptions } from '@duraflow/nestjs';
import { TestDatabase } from './database';

export interface TestAppOptions {
  db: TestDatabase;
  duraflow?: DuraflowModuleOptions;
  providers?: Provider[];
  imports?: Array<Type | DynamicModule>;
  /** Other modules' metadata, e.g. controllers. */
  extra?: Pick<ModuleMetadata, 'controllers' | 'exports'>;
}

/** Fast intervals for tests; each test may override any of them. */
export const TEST_DURAFLOW_OPTIONS: DuraflowModuleOptions = {
  worker: { pollIntervalMs: 50, shutdownTimeoutMs: 2_000 },
  heartbeatIntervalMs: 200,
};

/** A Nest application context with TypeORM on the test database and DuraflowModule, initialised. */
export async function startTestApp(options: TestAppOptions): Promise<TestingModule> {
  const duraflow = options.duraflow ?? {};
  const moduleRef = await Test.createTestingModule({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url: options.db.url, entities: [...DURAFLOW_ENTITIES] }),
      DuraflowModule.forRoot({
        ...TEST_DURAFLOW_OPTIONS,
        ...duraflow,
        worker: { ...TEST_DURAFLOW_OPTIONS.worker, ...duraflow.worker },
      }),
      ...(options.imports ?? []),
    ],
    providers: options.providers ?? [],
    ...options.extra,
  }).compile();
  moduleRef.useLogger(['error', 'warn']);
  return initTestingModule(moduleRef);
}

/**
 * Initialises a compiled module. Nest's close() re-throws a failed init, so when init fails
 * the pool TypeORM opened at compile time is closed here before the error goes on.
 */
export async function initTestingModule(moduleRef: TestingModule): Promise<TestingModule> {
  try {
    await moduleRef.init();
  } catch (error) {
    await moduleRef.get(DataSource).destroy();
    throw error;
  }
  return moduleRef;
}
