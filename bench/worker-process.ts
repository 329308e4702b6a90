import { ChildProcess, fork } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { SWC_REGISTER } from '../test/support/child-process';
import {
  BENCH_WORKER_CONFIG_ENV,
  BenchChildMessage,
  BenchDuraflowOptions,
  BenchRequest,
  BenchWorkerConfig,
  BenchWorkerStats,
} from './protocol';

const ENTRY = path.join(__dirname, 'worker-main.ts');
const OUTPUT_LINES = 200;

/** Every bench worker process still running: killed when the bench exits, however it exits. */
const alive = new Set<BenchWorkerProcess>();
let exitHookInstalled = false;

/** A bench worker process (bench/worker-main.ts): a Nest app with DuraflowModule, driven over IPC. */
export class BenchWorkerProcess {
  readonly output: string[] = [];
  readonly ready: Promise<{ bootMs: number }>;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private exitedYet = false;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (value: any) => void; reject: (error: Error) => void }>();

  private constructor(
    private readonly child: ChildProcess,
    readonly label: string,
    readonly workerId: string,
  ) {
    for (const stream of [child.stdout, child.stderr]) {
      if (stream) createInterface({ input: stream }).on('line', (line) => this.capture(line));
    }
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exitedYet = true;
        alive.delete(this);
        for (const waiter of this.pending.values()) waiter.reject(new Error(`${this.describe()} exited (code ${code}, signal ${signal})`));
        this.pending.clear();
        resolve({ code, signal });
      });
    });
    this.ready = new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${this.describe()} not ready after 60 s\n${this.tail()}`)), 60_000);
      timer.unref();
      child.on('message', (message: BenchChildMessage) => {
        if (message.type === 'ready') {
          clearTimeout(timer);
          resolve({ bootMs: message.bootMs });
        } else if (message.type === 'reply') {
          const waiter = this.pending.get(message.id);
          this.pending.delete(message.id);
          if (message.ok) waiter?.resolve(message.value);
          else waiter?.reject(new Error(`${this.describe()}: ${message.error?.message}`));
        }
      });
      void this.exited.then(({ code, signal }) => {
        clearTimeout(timer);
        reject(new Error(`${this.describe()} exited before it was ready (code ${code}, signal ${signal})\n${this.tail()}`));
      });
    });
    this.ready.catch(() => undefined);
  }

  /** Forks bench/worker-main.ts with `node -r test/support/swc-register.js`, as the chaos tests do. */
  static start(options: { databaseUrl: string; label: string; duraflow: BenchDuraflowOptions; exposeGc?: boolean }): BenchWorkerProcess {
    installExitHook();
    const config: BenchWorkerConfig = { databaseUrl: options.databaseUrl, duraflow: options.duraflow };
    const child = fork(ENTRY, [], {
      execArgv: ['-r', SWC_REGISTER, ...(options.exposeGc ? ['--expose-gc'] : [])],
      env: { ...process.env, NO_COLOR: '1', [BENCH_WORKER_CONFIG_ENV]: JSON.stringify(config) },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      serialization: 'advanced',
    });
    const worker = new BenchWorkerProcess(child, options.label, options.duraflow.workerId);
    alive.add(worker);
    return worker;
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  request<T>(request: BenchRequest, timeoutMs = 120_000): Promise<T> {
    if (this.exitedYet) return Promise.reject(new Error(`${this.describe()} has exited`));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${this.describe()} did not answer ${request.type} within ${timeoutMs} ms`));
      }, timeoutMs);
      const settle = <V>(fn: (value: V) => void) => (value: V) => {
        clearTimeout(timer);
        fn(value);
      };
      this.pending.set(id, { resolve: settle(resolve), reject: settle(reject) });
      this.child.send({ ...request, id }, (error) => {
        if (error) this.pending.get(id)?.reject(error);
      });
    });
  }

  startWorker(): Promise<void> {
    return this.request({ type: 'start-worker' });
  }

  stopWorker(): Promise<void> {
    return this.request({ type: 'stop-worker' });
  }

  stats(): Promise<BenchWorkerStats> {
    return this.request({ type: 'stats' });
  }

  memory(gc = false): Promise<NodeJS.MemoryUsage> {
    return this.request({ type: 'memory', gc });
  }

  queryCounts(): Promise<Record<string, number>> {
    return this.request({ type: 'query-counts' });
  }

  cpuUsage(): Promise<NodeJS.CpuUsage> {
    return this.request({ type: 'cpu' });
  }

  isLeader(): Promise<boolean> {
    return this.request({ type: 'is-leader' });
  }

  kill(signal: NodeJS.Signals): void {
    if (this.exitedYet) return;
    try {
      process.kill(this.pid, signal);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
    }
  }

  /** SIGTERM (Nest's shutdown hooks run), SIGKILL after `timeoutMs`. */
  async stop(timeoutMs = 15_000): Promise<void> {
    if (this.exitedYet) return;
    this.kill('SIGTERM');
    const timer = setTimeout(() => this.kill('SIGKILL'), timeoutMs);
    await this.exited;
    clearTimeout(timer);
  }

  tail(lines = 40): string {
    return this.output.slice(-lines).map((line) => `  [${this.label}] ${line}`).join('\n');
  }

  private describe(): string {
    return `Bench worker ${this.label} (pid ${this.pid})`;
  }

  private capture(line: string): void {
    this.output.push(line);
    if (this.output.length > OUTPUT_LINES) this.output.splice(0, this.output.length - OUTPUT_LINES);
  }
}

/** SIGKILLs every bench worker still running (scenario teardown after a failure, and on exit). */
export async function killAllWorkerProcesses(): Promise<void> {
  const workers = [...alive];
  for (const worker of workers) worker.kill('SIGKILL');
  await Promise.all(workers.map((worker) => worker.exited));
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const worker of alive) worker.kill('SIGKILL');
  });
}
