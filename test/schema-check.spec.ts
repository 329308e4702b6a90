import { Body, Controller, DynamicModule, Get, Module, Param, Post } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import {
  DURAFLOW_ENTITIES,
  DURAFLOW_MIGRATIONS,
  DuraflowModule,
  DuraflowExceptionFilter,
  duraflowErrorStatus,
  runDuraflowMigrations,
  SchemaNotReadyError,
  ReaperService,
  TaskStatus,
  workflow,
  WorkflowService,
} from '@duraflow/nestjs';
import { replayCheck } from '@duraflow/nestjs/replay';
import { CapturedLogs } from './support/captured-logs';
import { TestDatabase } from './support/database';
import { DURAFLOW_MIGRATION_NAMES } from './support/migration-names';
import { SUBMIT_ONLY, useTestBed } from './support/test-bed';
import { eventually, sleep } from './support/waiting';

const sum = workflow('sum', async (ctx) => {
  const { a, b } = ctx.input as { a: number; b: number };
  return ctx.step.run('add', () => ({ total: a + b }));
});

const NEWEST = DURAFLOW_MIGRATIONS[DURAFLOW_MIGRATIONS.length - 1];
const NEWEST_NAME = new NEWEST().name as string;

/** Applies these migrations (a part of the package's list) to `url`, recorded in `tableName`, as a DataSource would. */
async function applyMigrations(url: string, migrations: Function[], tableName?: string): Promise<void> {
  const dataSource = new DataSource({ type: 'postgres', url, migrations, migrationsTableName: tableName });
  await dataSource.initialize();
  try {
    await dataSource.runMigrations({ transaction: 'each' });
  } finally {
    await dataSource.destroy();
  }
}

/** The seed's tables made by the seed's SQL (the first migration's statements), with no migrations table. */
async function applySeedSql(url: string): Promise<void> {
  const dataSource = new DataSource({ type: 'postgres', url });
  await dataSource.initialize();
  const queryRunner = dataSource.createQueryRunner();
  try {
    await new DURAFLOW_MIGRATIONS[0]().up(queryRunner);
  } finally {
    await queryRunner.release();
    await dataSource.destroy();
  }
}

/** docs/operations.md, "Tables made by the seed's SQL", byte for byte. */
const ADOPT_SEED_TABLES_SQL = `CREATE TABLE IF NOT EXISTS migrations (id SERIAL PRIMARY KEY, "timestamp" bigint NOT NULL, name varchar NOT NULL);
INSERT INTO migrations ("timestamp", name) VALUES (1700000000000, 'SeedSchema1700000000000');`;

const expectRefusal = (error: unknown, missing: string[], unrecordedTables: boolean, table = 'migrations') => {
  expect(error).toBeInstanceOf(SchemaNotReadyError);
  expect(error).toMatchObject({ code: 'SCHEMA_NOT_READY', missingMigrations: missing, migrationsTable: table, unrecordedTables });
  const { message } = error as SchemaNotReadyError;
  for (const name of missing) expect(message).toContain(name);
  expect(message).toContain('DURAFLOW_MIGRATIONS');
  expect(message).toContain('migrationsRun: true');
  expect(message).toContain('npx duraflow migrate');
};

@Module({})
class ReplayHostModule {}

describe('the schema check at boot', () => {
  const bed = useTestBed({ database: false });
  const scratch = () => bed.createDatabase({ migrate: false, prefix: 'duraflow_schema' });

  /** A worker node (worker and reaper on, a schedule) that must refuse to start on `db`. */
  const refusedBoot = (db: TestDatabase, typeorm = {}) =>
    bed.bootFailure({
      databaseUrl: db.url,
      typeorm,
      duraflow: { workflows: [sum], schedules: [{ name: 'every-second', workflow: 'sum', cron: '* * * * * *', input: { a: 1, b: 1 } }] },
    });

  it('refuses a worker node on a database with the seed tables only, naming every later migration', async () => {
    const db = await scratch();
    await applyMigrations(db.url, DURAFLOW_MIGRATIONS.slice(0, 1));
    expectRefusal(await refusedBoot(db), DURAFLOW_MIGRATION_NAMES.slice(1), false);
  });

  it('refuses a worker node on the seed tables made by the seed SQL, with no migrations table, and says how to adopt them', async () => {
    const db = await scratch();
    await applySeedSql(db.url);
    const error = await refusedBoot(db);
    expectRefusal(error, DURAFLOW_MIGRATION_NAMES, true);
    expect((error as Error).message).toContain('record SeedSchema1700000000000 as applied');

    // docs/operations.md's way to adopt them: record the first migration, then migrate; the node then starts.
    await db.client.query(ADOPT_SEED_TABLES_SQL);
    expect(await runDuraflowMigrations(db.url)).toEqual(DURAFLOW_MIGRATION_NAMES.slice(1));
    const app = await bed.start({ databaseUrl: db.url, duraflow: { workflows: [sum] } });
    const task = await app.get(WorkflowService).submit('sum', { a: 1, b: 2 });
    expect((await app.get(WorkflowService).waitFor(task.id, { timeoutMs: 15_000 })).status).toBe(TaskStatus.COMPLETED);
  });

  it('refuses a worker node on tables that TypeORM synchronize made from DURAFLOW_ENTITIES without the migrations', async () => {
    const db = await scratch();
    const error = await refusedBoot(db, { synchronize: true });
    expectRefusal(error, DURAFLOW_MIGRATION_NAMES, true);
    expect((error as Error).message).toContain('`synchronize`');
    // synchronize made the entities' tables, but neither the leader lease nor the signals of later migrations.
    const { rows } = await db.client.query(`SELECT to_regclass('agent_tasks') AS tasks, to_regclass('duraflow_leader') AS leader`);
    expect(rows[0]).toEqual({ tasks: 'agent_tasks', leader: null });
  });

  it('refuses a worker node one migration behind before its worker, reaper, leader election and schedules start', async () => {
    const db = await scratch();
    await applyMigrations(db.url, DURAFLOW_MIGRATIONS.slice(0, -1));
    await db.client.query(`INSERT INTO agent_tasks (workflow_name, input) VALUES ('sum', '{"a": 1, "b": 2}')`);
    expectRefusal(await refusedBoot(db), [NEWEST_NAME], false);
    // Nothing ran: the task was never claimed, no node took the reaper's lease, no schedule ticked.
    const { rows } = await db.client.query(
      `SELECT (SELECT array_agg(status) FROM agent_tasks) AS statuses, (SELECT count(*)::int FROM duraflow_leader) AS leaders,
              (SELECT count(*)::int FROM duraflow_schedule_ticks) AS ticks`,
    );
    expect(rows[0]).toEqual({ statuses: [TaskStatus.PENDING], leaders: 0, ticks: 0 });
  });

  it('reads the DataSource’s migrationsTableName: refused when the migrations went to another table, boots once they are in its own', async () => {
    const db = await scratch();
    await runDuraflowMigrations(db.url);
    const error = await refusedBoot(db, { migrationsTableName: 'app_migrations' });
    expectRefusal(error, DURAFLOW_MIGRATION_NAMES, true, 'app_migrations');
    expect((error as Error).message).toContain('which records them in "migrations", not in "app_migrations"');

    const other = await scratch();
    const app = await bed.start({
      databaseUrl: other.url,
      typeorm: { migrations: [...DURAFLOW_MIGRATIONS], migrationsRun: true, migrationsTableName: 'app_migrations' },
      duraflow: { workflows: [sum] },
    });
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('sum', { a: 2, b: 3 });
    expect(await workflows.waitFor(task.id, { timeoutMs: 15_000 })).toMatchObject({ status: TaskStatus.COMPLETED, output: { total: 5 } });
  });

  it('lets the replay check boot the host’s module on a database a migration behind its code (it starts no worker)', async () => {
    const db = await scratch();
    await applyMigrations(db.url, DURAFLOW_MIGRATIONS.slice(0, -1));
    const host: DynamicModule = {
      module: ReplayHostModule,
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url, entities: [...DURAFLOW_ENTITIES], retryAttempts: 1 }),
        DuraflowModule.forRoot({ workflows: [sum] }),
      ],
    };
    await expect(replayCheck({ module: host, runs: [] })).resolves.toMatchObject({ checked: 0, errors: [] });
  });

  it('runs on a newer schema (a Duraflow migration this package does not know: a rolled-back deploy) and says so once', async () => {
    const db = await scratch();
    await runDuraflowMigrations(db.url);
    await db.client.query(`INSERT INTO migrations ("timestamp", name) VALUES (1700000000990, 'FromTheFuture1700000000990')`);
    // An application's own migration in the same table is none of Duraflow's business.
    await db.client.query(`INSERT INTO migrations ("timestamp", name) VALUES (1712345678901, 'AppOrders1712345678901')`);
    const logs = new CapturedLogs();
    const app = await bed.start({ databaseUrl: db.url, duraflow: { workflows: [sum] }, logger: logs });
    const workflows = app.get(WorkflowService);
    for (const input of [
      { a: 1, b: 1 },
      { a: 2, b: 2 },
    ]) {
      const task = await workflows.submit('sum', input);
      expect((await workflows.waitFor(task.id, { timeoutMs: 15_000 })).status).toBe(TaskStatus.COMPLETED);
    }
    const notes = logs.warnings.filter((line) => line.includes('FromTheFuture1700000000990'));
    expect(notes).toHaveLength(1);
    expect(notes[0]).toContain('does not know');
    expect(logs.text).not.toContain('AppOrders1712345678901');
  });
});

@Controller('tasks')
class TasksController {
  constructor(private readonly workflows: WorkflowService) {}

  @Post()
  submit(@Body() body: { a: number; b: number }) {
    return this.workflows.submit('sum', body);
  }

  @Get(':id')
  get(@Param('id') id: string) {
    return this.workflows.get(id);
  }
}

describe('the schema check of a submit-only node', () => {
  const bed = useTestBed({ database: { migrate: false, prefix: 'duraflow_schema' } });

  it('boots without worker and reaper, then throws SchemaNotReadyError on its first submit and read (not PostgreSQL’s error), and writes nothing', async () => {
    const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, reaper: { enabled: false }, workflows: [sum] } });
    const workflows = app.get(WorkflowService);
    const submit = workflows.submit('sum', { a: 1, b: 2 }).catch((error: unknown) => error);
    expectRefusal(await submit, DURAFLOW_MIGRATION_NAMES, false);
    await expect(workflows.get('00000000-0000-4000-8000-000000000000')).rejects.toBeInstanceOf(SchemaNotReadyError);
    await expect(workflows.list()).rejects.toMatchObject({ code: 'SCHEMA_NOT_READY' });
    const { rows } = await bed.db.client.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'`);
    expect(rows[0].n).toBe(0);
  });

  it('answers 503 SCHEMA_NOT_READY through DuraflowExceptionFilter and holds its reaper back, then serves and reaps once migrated, without a restart', async () => {
    expect(duraflowErrorStatus('SCHEMA_NOT_READY')).toEqual({ http: 503, grpc: 14 });
    const logs = new CapturedLogs();
    // SUBMIT_ONLY: no worker, the reaper on (as by default).
    const host = await bed.serve({
      duraflow: { ...SUBMIT_ONLY, reaper: { intervalMs: 100, leaderTtlMs: 1_000 }, workflows: [sum] },
      controllers: [TasksController],
      providers: [{ provide: APP_FILTER, useClass: DuraflowExceptionFilter }],
      logger: logs,
    });
    const submit = () =>
      fetch(`${host.url}/tasks`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ a: 4, b: 5 }) });

    const refused = await submit();
    expect(refused.status).toBe(503);
    const body = (await refused.json()) as { code: string; message: string; details: { missingMigrations: string[] } };
    expect(body.code).toBe('SCHEMA_NOT_READY');
    expect(body.message).toContain('npx duraflow migrate');
    expect(body.details.missingMigrations).toEqual(DURAFLOW_MIGRATION_NAMES);
    expect((await submit()).status).toBe(503);
    // The reaper stands for no election on tables that are not there: it says why once, then checks on each tick.
    await sleep(500);
    const reaper = host.app.get(ReaperService);
    expect(reaper.isLeader()).toBe(false);
    const waits = logs.lines.filter((line) => line.includes('The reaper waits for Duraflow'));
    expect(waits).toHaveLength(1);
    expect(waits[0]).toContain(NEWEST_NAME);
    expect(logs.text).not.toContain('does not exist');

    expect(await runDuraflowMigrations(bed.db.url)).toEqual(DURAFLOW_MIGRATION_NAMES);
    await eventually('the reaper leads once migrated', () => reaper.isLeader());
    const accepted = await submit();
    expect(accepted.status).toBe(201);
    const task = (await accepted.json()) as { id: string; status: string };
    expect(task.status).toBe(TaskStatus.PENDING);
    expect((await fetch(`${host.url}/tasks/${task.id}`)).status).toBe(200);
  });
});
