import { DuraflowError } from './duraflow.error';

/**
 * The database lacks Duraflow's tables, or migrations this package needs (an older schema after
 * an upgrade, tables that TypeORM's `synchronize` or the seed's SQL made without the migrations):
 * the worker and the reaper do not start, and a call that reads or writes tasks throws this until
 * the migrations are applied.
 */
export class SchemaNotReadyError extends DuraflowError {
  readonly code = 'SCHEMA_NOT_READY';
  constructor(
    /** The package's migrations the database has not recorded, in the order they run. */
    readonly missingMigrations: string[],
    /** The TypeORM migrations table that was read (the DataSource's `migrationsTableName`). */
    readonly migrationsTable: string,
    /** Duraflow's tables exist but their first migration is not recorded: `synchronize` or the seed's SQL made them. */
    readonly unrecordedTables: boolean,
  ) {
    super(
      `The database lacks ${missingMigrations.length} of Duraflow's migrations (${missingMigrations.join(', ')}), by the ` +
        `TypeORM migrations table "${migrationsTable}": Duraflow's worker and reaper do not start and its calls fail until ` +
        `they are applied. Apply them with DURAFLOW_MIGRATIONS in the DataSource's \`migrations\` and \`migrationsRun: true\` ` +
        `(TypeORM options), or with \`npx duraflow migrate\`${cliTableNote(migrationsTable)}.` +
        (unrecordedTables ? UNRECORDED_TABLES : ''),
    );
  }
}

/** `duraflow migrate` records in TypeORM's default table, which another name never reads. */
function cliTableNote(migrationsTable: string): string {
  return migrationsTable === 'migrations'
    ? ' (DATABASE_URL or --url)'
    : ` (which records them in "migrations", not in "${migrationsTable}")`;
}

const UNRECORDED_TABLES =
  " The table agent_tasks exists but no migration made it: TypeORM `synchronize` or the seed's SQL did, and the " +
  "migrations cannot run over it. Turn `synchronize` off (TypeORM runs it before `migrationsRun`); then, for tables from the seed's SQL, " +
  'record SeedSchema1700000000000 as applied before migrating, and for tables that `synchronize` made, drop them (when ' +
  'nothing in them must be kept) and migrate: see "Tables made without the migrations" in docs/operations.md.';
