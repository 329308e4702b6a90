import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { getDataSourceToken } from '@nestjs/typeorm';
import { Client, ClientBase, Pool, PoolClient, PoolConfig, QueryResult, QueryResultRow } from 'pg';
import { DataSource, EntityManager } from 'typeorm';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { InvalidDuraflowOptionsError } from '../domain/errors';
import { dedicatedClientConfig } from './dedicated-client-config';
import { migrationsTableOf, SchemaCheck } from './schema-check';
import { isTransientDatabaseError } from './transient-error';

/**
 * Runs one statement; `name` makes it a prepared statement on the connection that runs it.
 * Through DuraflowDatabase and its `transaction()` executors (not a caller's EntityManager), a
 * text with no values and no name may hold several statements: they go in one round trip
 * (simple query protocol) and run in one transaction (or in the caller's), and the result is
 * the last statement's.
 */
export interface SqlExecutor {
  query<R extends QueryResultRow = any>(text: string, values?: unknown[], name?: string): Promise<{ rows: R[]; rowCount: number }>;
}

/** Rows and count of a result, or of the last statement's when the text held several. */
function lastResult<R extends QueryResultRow>(result: QueryResult<R> | QueryResult<R>[]): { rows: R[]; rowCount: number } {
  const last = Array.isArray(result) ? result[result.length - 1] : result;
  return { rows: last.rows, rowCount: last.rowCount ?? 0 };
}

/**
 * An executor over one connection (what `transaction()` hands its work). `prepare: false`
 * drops statement names: behind a transaction-mode pooler a statement prepared on one server
 * connection is unknown on the next.
 */
export function clientExecutor(client: ClientBase, prepare = true): SqlExecutor {
  return {
    query: async (text: string, values: unknown[] = [], name?: string) =>
      lastResult(await client.query(name && prepare ? { name, text, values } : { text, values })),
  };
}

/**
 * Runs `work` in a transaction on `client`: committed when it resolves, rolled back when it
 * throws (`onBroken` hears of a rollback that failed too: the connection is then unusable).
 */
export async function transactionOn<T>(
  client: ClientBase,
  work: (executor: SqlExecutor) => Promise<T>,
  onBroken: (error: Error) => void = () => undefined,
  prepare = true,
): Promise<T> {
  try {
    await client.query('BEGIN');
    const result = await work(clientExecutor(client, prepare));
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(onBroken);
    throw error;
  }
}

/**
 * The engine's way into the host's TypeORM DataSource. Hot statements go straight to the
 * DataSource's own `pg` pool (prepared, one round trip, rows as they are); a caller's
 * EntityManager is used as is, so a submit joins the caller's transaction.
 */
@Injectable()
export class DuraflowDatabase implements SqlExecutor, OnModuleInit {
  private resolved: DataSource | undefined;
  private schemaCheck: SchemaCheck | undefined;

  constructor(
    private readonly moduleRef: ModuleRef,
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
  ) {}

  /** Fails the boot, not the first submit, when the DataSource is missing or not PostgreSQL. */
  onModuleInit(): void {
    void this.dataSource;
  }

  /** The host's DataSource (the default one, or the one named by the `dataSource` option). */
  get dataSource(): DataSource {
    if (this.resolved) return this.resolved;
    let dataSource: DataSource;
    try {
      dataSource = this.moduleRef.get(getDataSourceToken(this.options.dataSource) as string, { strict: false });
    } catch {
      throw new InvalidDuraflowOptionsError(
        'dataSource',
        `names no TypeORM DataSource${this.options.dataSource ? ` "${this.options.dataSource}"` : ''}: import ` +
          `TypeOrmModule.forRoot({ type: 'postgres', ... }) in the application (or fix the name).`,
      );
    }
    if (dataSource.options.type !== 'postgres') {
      throw new InvalidDuraflowOptionsError(
        'dataSource',
        `must be a PostgreSQL DataSource (type "postgres"), got "${dataSource.options.type}".`,
      );
    }
    return (this.resolved = dataSource);
  }

  private get pool(): Pool {
    const pool = (this.dataSource.driver as unknown as { master?: Pool }).master;
    if (!pool) throw new Error('The TypeORM DataSource is not initialized: Duraflow needs it connected.');
    return pool;
  }

  /** Behind pgbouncer in transaction mode: no named prepared statements, no session state through the pool. */
  get pooled(): boolean {
    return this.options.pooler === 'pgbouncer-transaction';
  }

  /** The sessions that hold state (LISTEN, advisory locks) can have one: a direct connection, or no pooler. */
  get sessionsDirect(): boolean {
    return !this.pooled || this.options.listenUrl !== undefined;
  }

  /**
   * Resolves once the database has every migration this package needs (cached from then on);
   * throws SchemaNotReadyError while it lacks one, checking again on each call. Every statement
   * below waits for it, so a call on a database that is not ready gets that error, not
   * PostgreSQL's `relation "agent_tasks" does not exist`.
   */
  ensureSchemaReady(): Promise<void> {
    this.schemaCheck ??= new SchemaCheck((text, values) => this.pool.query(text, values), migrationsTableOf(this.dataSource));
    return this.schemaCheck.ensureReady();
  }

  private get schemaReady(): boolean {
    return this.schemaCheck?.ready ?? false;
  }

  async query<R extends QueryResultRow = any>(text: string, values: unknown[] = [], name?: string) {
    if (!this.schemaReady) await this.ensureSchemaReady();
    return lastResult(await this.pool.query<R>(name && !this.pooled ? { name, text, values } : { text, values }));
  }

  /** The executor for a caller's EntityManager (its transaction), or the pool without one. */
  forManager(manager?: EntityManager): SqlExecutor {
    const queryRunner = manager?.queryRunner;
    if (!manager || !queryRunner || queryRunner.isReleased) return this;
    return {
      query: async (text: string, values: unknown[] = []) => {
        if (!this.schemaReady) await this.ensureSchemaReady();
        const result = await queryRunner.query(text, values, true);
        return { rows: result.records ?? [], rowCount: result.affected ?? 0 };
      },
    };
  }

  /**
   * Runs `work` in a transaction on one pooled connection: committed when it resolves, rolled
   * back when it throws. A connection that failed, or whose work met an outage (see
   * isTransientDatabaseError), is destroyed rather than returned to the pool.
   *
   * On the DataSource's own pg pool, not through a TypeORM QueryRunner: the executor must send
   * several statements in one round trip and return the last one's rows (the claim does, and a
   * caller may run it in here), which QueryRunner.query cannot; and it is the same pool either way.
   */
  async transaction<T>(work: (executor: SqlExecutor) => Promise<T>): Promise<T> {
    if (!this.schemaReady) await this.ensureSchemaReady();
    const client = await this.pool.connect();
    let broken: Error | undefined;
    // The server may end the session between two statements (idle_in_transaction_session_timeout,
    // pg_terminate_backend): pg emits that as an 'error' event, which would crash the process
    // unheard. The next statement fails with it instead, and the connection is destroyed.
    const onConnectionError = (error: Error) => (broken = error);
    client.on('error', onConnectionError);
    try {
      return await transactionOn(client, work, (error) => (broken = error), !this.pooled);
    } catch (error) {
      // A session that met an outage (25006 on a standby or demoted primary, a shutdown) is not
      // reused: the next one goes through the address again, to the new primary after a failover.
      if (isTransientDatabaseError(error)) broken ??= error as Error;
      throw error;
    } finally {
      client.off('error', onConnectionError);
      client.release(broken);
    }
  }

  /**
   * Runs `work` on one pooled connection, then returns it to the pool; a connection whose work
   * failed is destroyed (as `pool.query` does), so what `work` leaves on it (a `PREPARE`) is
   * known to hold on the next use. Session state: not behind a transaction-mode pooler.
   */
  async onConnection<T>(work: (client: PoolClient) => Promise<T>): Promise<T> {
    if (!this.schemaReady) await this.ensureSchemaReady();
    const client = await this.pool.connect();
    let broken: Error | undefined;
    const onConnectionError = (error: Error) => (broken = error);
    client.on('error', onConnectionError);
    try {
      return await work(client);
    } catch (error) {
      broken = error as Error;
      throw error;
    } finally {
      client.off('error', onConnectionError);
      client.release(broken);
    }
  }

  /**
   * A connection of its own, outside the pool (LISTEN, the leader's lease): to `listenUrl` when
   * given (past the pooler, with the pool's TLS unless the URL says otherwise), else with the
   * pool's server and credentials; `applicationName`
   * names it in pg_stat_activity.
   */
  createDedicatedClient(applicationName?: string): Client {
    return new Client(dedicatedClientConfig(this.pool.options as PoolConfig, this.options.listenUrl, applicationName));
  }
}
