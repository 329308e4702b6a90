/**
 * Applies the library's migrations (DURAFLOW_MIGRATIONS) to DATABASE_URL:
 *   npx tsx src/db/migrate.ts     (or: npm run migration:run, or: npx duraflow migrate)
 */
import 'reflect-metadata';
import { runDuraflowMigrations } from '@duraflow/nestjs';
import { databaseUrl } from './database-url';

export function runMigrations(url = databaseUrl()): Promise<string[]> {
  return runDuraflowMigrations(url);
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
