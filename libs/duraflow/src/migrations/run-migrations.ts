import { DataSource } from 'typeorm';
import { DURAFLOW_MIGRATIONS } from './index';

/**
 * Applies the Duraflow migrations that `url` lacks, each in its own transaction, recording them
 * in TypeORM's `migrations` table as `migrationsRun` would. Resolves with the names applied.
 */
export async function runDuraflowMigrations(url: string): Promise<string[]> {
  const dataSource = new DataSource({ type: 'postgres', url, migrations: [...DURAFLOW_MIGRATIONS] });
  await dataSource.initialize();
  try {
    const applied = await dataSource.runMigrations({ transaction: 'each' });
    return applied.map((migration) => migration.name);
  } finally {
    await dataSource.destroy();
  }
}
