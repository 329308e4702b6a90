/**
 * Applies the migrations in migrations/ to DATABASE_URL:
 *   npx tsx src/db/migrate.ts     (or: npm run migration:run)
 */
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { DURAFLOW_MIGRATIONS } from '../../migrations';
import { databaseUrl } from './database-url';

export async function runMigrations(url = databaseUrl()): Promise<string[]> {
  const dataSource = new DataSource({ type: 'postgres', url, migrations: [...DURAFLOW_MIGRATIONS] });
  await dataSource.initialize();
  try {
    const applied = await dataSource.runMigrations({ transaction: 'each' });
    return applied.map((migration) => migration.name);
  } finally {
    await dataSource.destroy();
  }
}

if (require.main === module) {
  runMigrations()
    .then((applied) => {
      console.log(applied.length ? `Applied: ${applied.join(', ')}` : 'Schema is up to date');
    })
    .catch((error: unknown) => {
      console.error(`Migration failed: ${error instanceof Error ? error.message : String(error)}`);
      process.exitCode = 1;
    });
}
