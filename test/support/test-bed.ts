import { DynamicModule, INestApplication, LoggerService, LogLevel, Provider, Type } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import type { AddressInfo } from 'node:net';
import type { DataSource } from 'typeorm';
import { DURAFLOW_ENTITIES, DuraflowModule, DuraflowModuleOptions } from '@duraflow/nestjs';
import { createTestDatabase, TestDatabase, TestDatabaseOptions } from './database';
import { TableRows } from './table-rows';

/** Fast intervals for tests; each test may override any of them. */
export const TEST_DURAFLOW_OPTIONS: DuraflowModuleOptions = {
  // The idle backoff stays on, with a ceiling short enough for tests that insert tasks past the library.
  worker: { pollIntervalMs: 50, maxIdlePollIntervalMs: 1_000, shutdownTimeoutMs: 2_000 },
  heartbeatIntervalMs: 200,
};

/** An app that submits and reads, and runs nothing. */
export const SUBMIT_ONLY: DuraflowModuleOptions = { worker: { enabled: false } };

export interface TestAppOptions {
  /** DuraflowModule.forRoot's options, over TEST_DURAFLOW_OPTIONS (`worker` merged key by key). */
  duraflow?: DuraflowModuleOptions;
  /** A DuraflowModule the test builds itself (forRootAsync, forRoot with every default), instead of `duraflow`. */
  duraflowModule?: DynamicModule;
  /** TypeORM options over the bed's: a DataSource of another name, a schema TypeORM synchronizes, migrations it runs. */
  typeorm?: { name?: string; synchronize?: boolean; migrations?: Function[]; migrationsRun?: boolean; migrationsTableName?: string };
  /** Where the app connects instead of the bed's database: another database, or a proxy in front of it. */
  databaseUrl?: string;
  providers?: Provider[];
  imports?: Array<Type | DynamicModule>;
  controllers?: Type[];
  /** What Nest logs (or a logger that keeps it). Default: errors and warnings. */
  logger?: LogLevel[] | LoggerService | false;
}

export interface TestHttpAppOptions extends TestAppOptions {
  /** Runs before the app listens: global prefix, global filters. */
  configure?: (app: INestApplication) => void;
}

/** An app listening for HTTP on 127.0.0.1. */
export interface TestHttpApp {
  app: INestApplication;
  /** e.g. http://127.0.0.1:43123 */
  url: string;
  close(): Promise<void>;
}

/** What the bed closes (or drops) for the test: apps, engines, databases, worker processes. */
export interface Closeable {
  close(): Promise<unknown>;
}

interface Opened {
  resource: unknown;
  close(): Promise<unknown>;
}

/** What a test, or the block outside its tests, opened: closed together. */
class Scope {
  readonly opened: Opened[] = [];
  readonly preludes: Array<() => Promise<unknown>> = [];

  /** Runs the preludes, then closes each, newest first, even when one fails; then throws the first failure. */
  async close(): Promise<void> {
    const failures: unknown[] = [];
    for (const prelude of this.preludes.splice(0)) await prelude().catch((error: unknown) => failures.push(error));
    for (const { close } of this.opened.splice(0).reverse()) await close().catch((error: unknown) => failures.push(error));
    if (failures.length) throw failures[0];
  }
}

const TEST_LOG_LEVELS: LogLevel[] = ['error', 'warn'];

/**
 * Where a spec runs: a fresh database of its own on the run's PostgreSQL, the Nest apps it boots
 * there with the fast test options, and whatever else it starts (engines, databases, processes).
 * Everything is closed newest first, and the database dropped, whatever the test did: what a test
 * (or a `beforeEach`) opened goes after that test, what a `beforeAll` opened at the end of the
 * block that set the bed up, or earlier with `close()`. `useTestBed()` wires it into Jest.
 */
export class TestBed {
  private database: TestDatabase | undefined;
  /** Opened outside a test (setUp, beforeAll): closed by tearDown. */
  private readonly lasting = new Scope();
  /** Opened while a test runs: closed when it ends. */
  private current: Scope | undefined;

  /** The bed's database (one for the block, or one per test). */
  get db(): TestDatabase {
    if (!this.database) throw new Error('The test bed has no database: call useTestBed() in the describe block (or setUp() first).');
    return this.database;
  }

  /** The bed's tables, read past the library. */
  get rows(): TableRows {
    return new TableRows(this.db.client);
  }

  /** Creates the bed's database (migrated unless told otherwise). */
  async setUp(options: TestDatabaseOptions = {}): Promise<TestDatabase> {
    this.database = await this.createDatabase(options);
    return this.database;
  }

  /** Another database on the same server (a scratch one, one never migrated), dropped like the rest. */
  async createDatabase(options: TestDatabaseOptions = {}): Promise<TestDatabase> {
    const db = await createTestDatabase(options);
    this.open(db, async () => {
      if (this.database === db) this.database = undefined;
      await db.drop();
    });
    return db;
  }

  /** A Nest application context with TypeORM on the bed's database and DuraflowModule, initialised. */
  async start(options: TestAppOptions = {}): Promise<TestingModule> {
    const moduleRef = await this.compile(options);
    moduleRef.useLogger(options.logger ?? TEST_LOG_LEVELS);
    await initialise(moduleRef, options);
    return this.closeLater(closingOnce(moduleRef));
  }

  /** The same app as a Nest HTTP application (Express), listening on a free port of 127.0.0.1. */
  async serve(options: TestHttpAppOptions = {}): Promise<TestHttpApp> {
    const moduleRef = await this.compile(options);
    const app = moduleRef.createNestApplication({ logger: options.logger ?? TEST_LOG_LEVELS });
    options.configure?.(app);
    await app.listen(0, '127.0.0.1');
    const { port } = app.getHttpServer().address() as AddressInfo;
    return this.closeLater(closingOnce({ app, url: `http://127.0.0.1:${port}`, close: () => app.close() }));
  }

  /** Boots an app that must refuse to start, and returns what it threw (nothing stays open). */
  async bootFailure(options: TestAppOptions): Promise<unknown> {
    const moduleRef = await this.compile(options);
    moduleRef.useLogger(options.logger ?? false);
    try {
      await initialise(moduleRef, options);
    } catch (error) {
      return error;
    }
    await moduleRef.close();
    throw new Error('The application started, but it was expected to fail at boot.');
  }

  /** Something the test started (an engine, a server, a process): closed with the apps, newest first, by `close`. */
  closeLater<T extends Closeable>(resource: T): T;
  closeLater<T>(resource: T, close: (resource: T) => Promise<unknown>): T;
  closeLater<T>(resource: T, close = (opened: T) => (opened as unknown as Closeable).close()): T {
    this.open(resource, () => close(resource));
    return resource;
  }

  /**
   * Runs before anything opened with it closes: what must come back first so that the rest
   * closes as it would in production (a proxy or a server a test stopped).
   */
  beforeClosing(prelude: () => Promise<unknown>): void {
    (this.current ?? this.lasting).preludes.push(prelude);
  }

  /** Closes one now (a test that checks what closing does, or a block's own app at its end). */
  async close(resource: unknown): Promise<void> {
    for (const scope of [this.current, this.lasting]) {
      const index = scope?.opened.findIndex((opened) => opened.resource === resource) ?? -1;
      if (index >= 0) {
        const [opened] = scope!.opened.splice(index, 1);
        await opened.close();
        return;
      }
    }
    throw new Error('The test bed did not open this: close it yourself.');
  }

  /** From here until endTest(), what is opened belongs to the test. */
  beginTest(): void {
    this.current = new Scope();
  }

  /** Closes what the test opened, newest first. */
  async endTest(): Promise<void> {
    const scope = this.current;
    this.current = undefined;
    await scope?.close();
  }

  /** Closes everything still open, newest first, the database last. */
  async tearDown(): Promise<void> {
    try {
      await this.endTest();
    } finally {
      await this.lasting.close();
    }
  }

  private open(resource: unknown, close: () => Promise<unknown>): void {
    (this.current ?? this.lasting).opened.push({ resource, close });
  }

  private compile(options: TestAppOptions): Promise<TestingModule> {
    return Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({
          type: 'postgres',
          url: options.databaseUrl ?? this.db.url,
          entities: [...DURAFLOW_ENTITIES],
          ...options.typeorm,
        }),
        options.duraflowModule ?? DuraflowModule.forRoot(withTestOptions(options.duraflow)),
        ...(options.imports ?? []),
      ],
      providers: options.providers ?? [],
      controllers: options.controllers ?? [],
    }).compile();
  }
}

export interface TestBedOptions {
  /** The database: created for the block (default) or for each test. */
  databasePerTest?: boolean;
  /** How it is created; `false`: the bed has none (the tests create their own with createDatabase). */
  database?: TestDatabaseOptions | false;
}

/**
 * A test bed for the describe block it is called in (call it first in the block): its database
 * is created before the block's tests (or before each), and what a test opened is closed after
 * it; the rest, and the database, after the block.
 */
export function useTestBed(options: TestBedOptions = {}): TestBed {
  const bed = new TestBed();
  const database = options.database;
  if (database !== false && !options.databasePerTest) beforeAll(() => bed.setUp(database));
  beforeEach(async () => {
    bed.beginTest();
    if (database !== false && options.databasePerTest) await bed.setUp(database);
  });
  afterEach(() => bed.endTest());
  afterAll(() => bed.tearDown());
  return bed;
}

/** Closing it again (the test closed it, then the bed) waits for the first close and does nothing more. */
function closingOnce<T extends Closeable>(resource: T): T {
  const close = resource.close.bind(resource);
  let closing: Promise<unknown> | undefined;
  resource.close = () => (closing ??= close()) as ReturnType<T['close']>;
  return resource;
}

function withTestOptions(duraflow: DuraflowModuleOptions = {}): DuraflowModuleOptions {
  return { ...TEST_DURAFLOW_OPTIONS, ...duraflow, worker: { ...TEST_DURAFLOW_OPTIONS.worker, ...duraflow.worker } };
}

/**
 * Nest's close() re-throws a failed init, so when init fails the pool TypeORM opened at compile
 * time is closed here before the error goes on.
 */
async function initialise(moduleRef: TestingModule, options: TestAppOptions): Promise<void> {
  try {
    await moduleRef.init();
  } catch (error) {
    await moduleRef.get<DataSource>(getDataSourceToken(options.typeorm?.name)).destroy();
    throw error;
  }
}
