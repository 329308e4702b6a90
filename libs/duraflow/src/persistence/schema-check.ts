import { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { SchemaNotReadyError } from '../domain/errors';
import { DURAFLOW_MIGRATIONS } from '../migrations';

/**
 * Duraflow's migrations are timestamped from 1700000000000 on, a few ms apart: a row of the
 * migrations table in this window is one of Duraflow's (an application's own migrations carry the
 * time they were written). One this package does not list comes from a newer version.
 */
const DURAFLOW_TIMESTAMPS = [1_700_000_000_000, 1_700_000_999_999] as const;

/** The package's migrations by the name TypeORM records, in the order they run. */
const PACKAGE_MIGRATIONS: readonly string[] = DURAFLOW_MIGRATIONS.map((Migration) => new Migration().name as string);

/** Runs one statement past the schema gate (DuraflowDatabase's pool; an executor type of its own, as that file imports this one). */
export type SchemaQuery = (text: string, values?: unknown[]) => Promise<{ rows: unknown[] }>;

/** What the database says of Duraflow's schema. */
export interface SchemaState {
  /** Duraflow's migrations recorded in the migrations table, oldest first (none when it does not exist). */
  recorded: string[];
  /** Whether `agent_tasks` exists (with or without a migration recorded for it). */
  hasTasksTable: boolean;
}

/** The migrations table of a DataSource, as TypeORM names it: `migrationsTableName` (default `migrations`) in its `schema`. */
export function migrationsTableOf(dataSource: DataSource): string {
  const { migrationsTableName, schema } = dataSource.options as { migrationsTableName?: string; schema?: string };
  return [schema, migrationsTableName ?? 'migrations'].filter(Boolean).join('.');
}

const quotedPath = (path: string) =>
  path
    .split('.')
    .map((part) => `"${part.replace(/"/g, '""')}"`)
    .join('.');

/**
 * One statement on the happy path: the recorded names and whether the tables exist. A database
 * without the migrations table (never migrated, or made by `synchronize`) fails it with
 * undefined_table; only then a second statement asks whether the tables exist.
 */
export async function readSchemaState(query: SchemaQuery, migrationsTable: string): Promise<SchemaState> {
  try {
    const { rows } = await query(
      `SELECT array(SELECT name FROM ${quotedPath(migrationsTable)} WHERE "timestamp" BETWEEN $1 AND $2 ORDER BY "timestamp") AS recorded,
              to_regclass('agent_tasks') IS NOT NULL AS has_tasks_table`,
      [...DURAFLOW_TIMESTAMPS],
    );
    const [row] = rows as Array<{ recorded: string[]; has_tasks_table: boolean }>;
    return { recorded: row.recorded, hasTasksTable: row.has_tasks_table };
  } catch (error) {
    if ((error as { code?: string }).code !== '42P01') throw error;
    const { rows } = await query(`SELECT to_regclass('agent_tasks') IS NOT NULL AS has_tasks_table`);
    return { recorded: [], hasTasksTable: (rows[0] as { has_tasks_table: boolean }).has_tasks_table };
  }
}

/**
 * Whether the database has every migration this package needs. Checked once and cached when it
 * does; while it does not, each `ensureReady()` checks again (one statement), so applying the
 * migrations heals a running process. Concurrent callers share one check. A newer schema (a
 * Duraflow migration recorded that this package does not list: a rolled-back deploy) is ready,
 * and said once in the log.
 */
export class SchemaCheck {
  private readonly logger = new Logger('Duraflow');
  private isReady = false;
  private checking: Promise<void> | undefined;

  constructor(
    private readonly query: SchemaQuery,
    private readonly migrationsTable: string,
  ) {}

  get ready(): boolean {
    return this.isReady;
  }

  /** Resolves when the schema is ready; throws SchemaNotReadyError (or the database's error) when it is not. */
  ensureReady(): Promise<void> {
    if (this.isReady) return Promise.resolve();
    return (this.checking ??= this.check().finally(() => (this.checking = undefined)));
  }

  private async check(): Promise<void> {
    const { recorded, hasTasksTable } = await readSchemaState(this.query, this.migrationsTable);
    const missing = PACKAGE_MIGRATIONS.filter((name) => !recorded.includes(name));
    if (missing.length) throw new SchemaNotReadyError(missing, this.migrationsTable, hasTasksTable && missing[0] === PACKAGE_MIGRATIONS[0]);
    const unknown = recorded.filter((name) => !PACKAGE_MIGRATIONS.includes(name));
    if (unknown.length) {
      this.logger.warn(
        `The database has Duraflow migrations this version of the package does not know (${unknown.join(', ')}): a newer ` +
          `version migrated it (a rolled-back deploy?). Running on it, as its migrations only add to the schema.`,
      );
    }
    this.isReady = true;
  }
}
