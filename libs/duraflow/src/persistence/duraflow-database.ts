import { Injectable } from '@nestjs/common';
import { Client, Pool, PoolConfig, QueryResultRow } from 'pg';
import { DataSource, EntityManager } from 'typeorm';
import { InvalidDuraflowOptionsError } from '../errors';

/** Runs one statement; `name` makes it a prepared statement on the connection that runs it. */
export interface SqlExecutor {
  query<R extends QueryResultRow = any>(text: string, values?: unknown[], name?: string): Promise<{ rows: R[]; rowCount: number }>;
}

/**
 * The engine's way into the host's TypeORM DataSource. Hot statements go straight to the
 * DataSource's own `pg` pool (prepared, one round trip, rows as they are); a caller's
 * EntityManager is used as is, so a submit joins the caller's transaction.
 */
@Injectable()
export class DuraflowDatabase implements SqlExecutor {
  constructor(private readonly dataSource: DataSource) {}

  private get pool(): Pool {
    if (this.dataSource.options.type !== 'postgres') {
      throw new InvalidDuraflowOptionsError(
        'DataSource',
        `must be a PostgreSQL DataSource (type "postgres"), got "${this.dataSource.options.type}".`,
      );
    }
    const pool = (this.dataSource.driver as unknown as { master?: Pool }).master;
    if (!pool) throw new Error('The TypeORM DataSource is not initialized: Duraflow needs it connected.');
    return pool;
  }

  async query<R extends QueryResultRow = any>(text: string, values: unknown[] = [], name?: string) {
    const result = await this.pool.query<R>(name ? { name, text, values } : { text, values });
    return { rows: result.rows, rowCount: result.rowCount ?? 0 };
  }

  /** The executor for a caller's EntityManager (its transaction), or the pool without one. */
  forManager(manager?: EntityManager): SqlExecutor {
    const queryRunner = manager?.queryRunner;
    if (!manager || !queryRunner || queryRunner.isReleased) return this;
    return {
      query: async (text: string, values: unknown[] = []) => {
        const result = await queryRunner.query(text, values, true);
        return { rows: result.records ?? [], rowCount: result.affected ?? 0 };
      },
    };
  }

  /** A connection of its own, outside the pool, for LISTEN: same server and credentials. */
  createDedicatedClient(): Client {
    return new Client({ ...(this.pool.options as PoolConfig) });
  }
}
