import { Logger, LoggerService } from '@nestjs/common';
import type { ModuleRef } from '@nestjs/core';
import { DataSource } from 'typeorm';
import { PayloadCoder } from '../codec/payload-coder';
import { resolveDuraflowOptions, ResolvedDuraflowOptions } from '../config/resolved-options';
import { PayloadCodec } from '../domain/payload-codec';
import { DuraflowDatabase } from '../persistence/duraflow-database';
import { connectDatabase } from './database-connection';

/** The library's database access, opened by the command on a URL instead of the app's DataSource. */
export interface CliDatabase {
  db: DuraflowDatabase;
  /** The options a node without a worker gets by default (the command has no app to read them from). */
  options: ResolvedDuraflowOptions;
  /** The payloads' codec (DURAFLOW_CODEC_KEYS), or the identity. */
  coder: PayloadCoder;
  close(): Promise<void>;
}

/** The library's log lines go to stderr: stdout carries the command's answer (one JSON document with --json). */
const STDERR_LOGGER: LoggerService = {
  log: () => undefined,
  warn: (message: unknown) => process.stderr.write(`duraflow: ${String(message)}\n`),
  error: (message: unknown) => process.stderr.write(`duraflow: ${String(message)}\n`),
};

/**
 * A DuraflowDatabase on `url`, as the module builds one on the app's DataSource: the same
 * statements, the same schema check before the first one (SchemaNotReadyError on a database
 * that lacks a migration), the same NOTIFYs. An unreachable server is DatabaseUnreachableError,
 * within the connect timeout, before anything else.
 */
export async function openCliDatabase(url: string, codec?: PayloadCodec): Promise<CliDatabase> {
  Logger.overrideLogger(STDERR_LOGGER);
  await (await connectDatabase(url)).end();
  const dataSource = new DataSource({ type: 'postgres', url, entities: [], logging: false, poolSize: 2 });
  await dataSource.initialize();
  const options = resolveDuraflowOptions({ worker: { enabled: false }, reaper: { enabled: false }, codec });
  // The DataSource the module would find through the ModuleRef under its token.
  const moduleRef = { get: () => dataSource } as unknown as ModuleRef;
  const db = new DuraflowDatabase(moduleRef, options);
  return { db, options, coder: new PayloadCoder(options), close: () => dataSource.destroy() };
}
