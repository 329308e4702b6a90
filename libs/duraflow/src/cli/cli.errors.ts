import { DuraflowError } from '../domain/errors/duraflow.error';

/** The command line itself is wrong: unknown command or option, a missing value. Exit code 2. */
export class CliUsageError extends DuraflowError {
  readonly code = 'CLI_USAGE';
}

/** DATABASE_URL / --url is missing or not a PostgreSQL URL. Exit code 2. */
export class InvalidDatabaseUrlError extends DuraflowError {
  readonly code = 'INVALID_DATABASE_URL';
}

/** The server did not answer, refused the login, or has no such database. Exit code 1. */
export class DatabaseUnreachableError extends DuraflowError {
  readonly code = 'DATABASE_UNREACHABLE';
}

/** The database has no Duraflow tables (yet). Exit code 1. */
export class SchemaMissingError extends DuraflowError {
  readonly code = 'SCHEMA_MISSING';
}

/** `--redis` / REDIS_URL is not a Redis URL, or Redis did not answer. Exit code 1. */
export class RedisUnreachableError extends DuraflowError {
  readonly code = 'REDIS_UNREACHABLE';
}

/** export-runs: a file is already where `--out` points, and `--force` was not given. Exit code 1. */
export class OutputFileExistsError extends DuraflowError {
  readonly code = 'OUTPUT_FILE_EXISTS';
  constructor(readonly file: string) {
    super(`${file} exists: pass --force to replace it, or choose another --out.`);
  }
}

/** export-runs: `--out` is a symbolic link, which the command never writes through (even with `--force`). Exit code 1. */
export class OutputFileIsLinkError extends DuraflowError {
  readonly code = 'OUTPUT_FILE_IS_LINK';
  constructor(readonly file: string) {
    super(`${file} is a symbolic link: the export is never written through a link. Remove the link, or choose another --out.`);
  }
}

/** The operation runs the workflow's code (compensations, an input's DTO), which the command does not have: nothing was changed. Exit code 1. */
export class NeedsApplicationError extends DuraflowError {
  readonly code = 'NEEDS_APPLICATION';
}
