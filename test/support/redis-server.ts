import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports';
import { DEFAULT_REDIS_URL } from './shared-servers';

/** The Redis the whole test run shares (never stopped by a test): REDIS_URL, set by the global setup when it starts one. */
export const SHARED_REDIS_URL = process.env.REDIS_URL || DEFAULT_REDIS_URL;

const READY_LINE = 'Ready to accept connections';
const START_TIMEOUT_MS = 10_000;

/** Servers still running, killed if the test process ends without tearing them down. */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/**
 * A private `redis-server` on a free port, for tests that take Redis away: no persistence, so
 * a stop loses every key, as a crashed cache would. Always `teardown()` it (afterAll/afterEach).
 */
export class RedisServer {
  private process: ChildProcess | undefined;

  private constructor(
    readonly port: number,
    private readonly dir: string,
  ) {}

  static async start(): Promise<RedisServer> {
    const server = new RedisServer(await freePort(), mkdtempSync(join(tmpdir(), 'duraflow-redis-')));
    try {
      await server.restart();
    } catch (error) {
      await server.teardown();
      throw error;
    }
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.process !== undefined;
  }

  /** Kills the server outright (SIGKILL): its clients see their connections drop. */
  async stop(): Promise<void> {
    const child = this.process;
    if (!child) return;
    this.process = undefined;
    running.delete(child);
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  }

  /** Starts the server (again) on the same port; resolves once it accepts connections. */
  async restart(): Promise<void> {
    if (this.process) return;
    const child = spawn(
      process.env.REDIS_SERVER_BIN || 'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.process = child;
    running.add(child);
    let output = '';
    await new Promise<void>((resolve, reject) => {
      const onOutput = (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes(READY_LINE)) settle();
      };
      const onExit = (code: number | null) => settle(new Error(`exited with code ${code}`));
      const settle = (error?: Error) => {
        clearTimeout(timer);
        child.stdout!.off('data', onOutput);
        child.stderr!.off('data', onOutput);
        child.off('exit', onExit);
        child.off('error', settle);
        // Keep draining its output, or a full pipe would block the server.
        child.stdout!.resume();
        child.stderr!.resume();
        if (!error) return resolve();
        child.kill('SIGKILL');
        running.delete(child);
        this.process = undefined;
        reject(new Error(`redis-server on port ${this.port} did not start: ${error.message}\n${output}`));
      };
      const timer = setTimeout(() => settle(new Error(`timed out after ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
      child.stdout!.on('data', onOutput);
      child.stderr!.on('data', onOutput);
      child.once('exit', onExit);
      child.once('error', settle);
    });
  }

  async teardown(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
