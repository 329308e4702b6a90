import { runDuraflowMigrations } from '../migrations/run-migrations';
import { connectDatabase, describeDatabase } from './database-connection';

/** `duraflow migrate`: applies the migrations the database lacks and says which. */
export async function migrateCommand(url: string, print: (line: string) => void): Promise<void> {
  // Connecting first turns an unreachable server into one clear line, within a timeout.
  const client = await connectDatabase(url);
  await client.end();
  const applied = await runDuraflowMigrations(url);
  print(applied.length ? `Applied to ${describeDatabase(url)}: ${applied.join(', ')}` : `Schema is up to date on ${describeDatabase(url)}`);
}
