import { ChildProcess, fork } from 'node:child_process';
import { createInterface } from 'node:readline';
import { SWC_REGISTER } from './typescript-node';
import { CallRequest, WORKER_CONFIG_ENV, WorkerChildMessage, WorkerConfig } from './worker-ipc';

/**
 * The parent's side of a worker process (a Nest app with DuraflowModule in a process of its own,
 * test/fixtures/chaos/worker-main.ts or bench/worker-main.ts): forked under the swc require hook,
 * its output captured, driven over IPC, killed or stopped; the child's side is worker-ipc.ts.
 */

export interface WorkerProcessOptions {
  /** The child's entry: a TypeScript file that serves its app with serveWorkerApp (worker-ipc.ts). */
  entry: string;
  /** What the child reads with readWorkerConfig(): JSON, no functions. */
  config: WorkerConfig;
  /** Names the process in its captured output and in errors. */
  label: string;
  /** Added to the child's environment. */
  env?: Record<string, string>;
  /** Node options, e.g. --expose-gc. */
  execArgv?: string[];
  /**
   * A command node runs under, keeping the IPC channel: e.g. `['ip', 'netns', 'exec', 'ns1']` runs
   * the worker in a network namespace (the bench's many-hosts harness). Default: none.
   */
  launcher?: string[];
  /** `ready` rejects if the child has not reported ready by then. Default 30 s. */
  readyTimeoutMs?: number;
  /** A request rejects if the child has not answered it by then. Default 10 s. */
  requestTimeoutMs?: number;
}

export interface WorkerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface WorkerReady {
  workerId: string;
  /** Process start to app bootstrapped (a chaos worker's worker started too), measured by the child. */
  bootMs: number;
  /** fork() to the ready message, measured by the parent. */
  startupMs: number;
}

const MAX_OUTPUT_LINES = 400;

/** Every child started since the last stopAllWorkerProcesses(), exited ones included (their output matters). */
const started: WorkerProcess[] = [];
let exitHookInstalled = false;

/**
 * A worker process, forked when constructed. It never outlives the parent: stopAllWorkerProcesses()
 * and the parent's exit SIGKILL it, and the child exits by itself when its IPC channel closes.
 * `R` is the requests its entry answers besides `call`.
 */
export class WorkerProcess<R extends { type: string } = never> {
  readonly label: string;
  readonly workerId: string;
  /** Captured stdout and stderr lines, prefixed with the label. */
  readonly output: string[] = [];
  /** Resolves when the app is bootstrapped (and a chaos worker's worker started); rejects if the child dies first. */
  readonly ready: Promise<WorkerReady>;
  readonly exited: Promise<WorkerExit>;
  private readonly child: ChildProcess;
  private readonly requestTimeoutMs: number;
  private exit: WorkerExit | undefined;
  private nextRequestId = 1;
  private readonly pending = new Map<number, { resolve: (value: any) => void; reject: (error: Error) => void }>();

  constructor(options: WorkerProcessOptions) {
    killChildrenOnExit();
    this.label = options.label;
    this.workerId = options.config.duraflow.workerId;
    this.requestTimeoutMs = options.requestTimeoutMs ?? 10_000;
    const forkedAt = Date.now();
    const nodeArgs = ['-r', SWC_REGISTER, ...(options.execArgv ?? [])];
    const [launcher, ...launcherArgs] = options.launcher ?? [];
    this.child = fork(options.entry, [], {
      ...(launcher ? { execPath: launcher, execArgv: [...launcherArgs, process.execPath, ...nodeArgs] } : { execArgv: nodeArgs }),
      env: { ...process.env, NO_COLOR: '1', [WORKER_CONFIG_ENV]: JSON.stringify(options.config), ...options.env },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      serialization: 'advanced',
    });
    started.push(this);
    const { child, label } = this;
    for (const [stream, name] of [
      [child.stdout, 'out'],
      [child.stderr, 'err'],
    ] as const) {
      if (stream) createInterface({ input: stream }).on('line', (line) => this.capture(`[${label} ${name}] ${line}`));
    }

    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exit = { code, signal };
        this.capture(`[${label}] exited (code ${code}, signal ${signal})`);
        for (const { reject } of this.pending.values()) reject(new Error(`${this.describe()} exited before it answered`));
        this.pending.clear();
        resolve(this.exit);
      });
      child.once('error', (error) => {
        this.capture(`[${label}] process error: ${error.message}`);
        if (child.pid === undefined) resolve((this.exit = { code: null, signal: null }));
      });
    });

    const readyTimeoutMs = options.readyTimeoutMs ?? 30_000;
    this.ready = new Promise<WorkerReady>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${this.describe()} did not report ready within ${readyTimeoutMs} ms\n${this.outputTail()}`)),
        readyTimeoutMs,
      );
      timer.unref();
      child.on('message', (message: WorkerChildMessage) => {
        if (message.type === 'ready') {
          clearTimeout(timer);
          resolve({ workerId: message.workerId, bootMs: message.bootMs, startupMs: Date.now() - forkedAt });
        } else if (message.type === 'reply') {
          const waiter = this.pending.get(message.id);
          this.pending.delete(message.id);
          if (!waiter) return;
          if (message.ok) waiter.resolve(message.value);
          else
            waiter.reject(
              Object.assign(new Error(message.error?.message), { name: message.error?.name, childStack: message.error?.stack }),
            );
        }
      });
      void this.exited.then((exit) => {
        clearTimeout(timer);
        reject(new Error(`${this.describe()} exited before it was ready (code ${exit.code}, signal ${exit.signal})\n${this.outputTail()}`));
      });
    });
    // Nobody may be waiting for `ready` when a child dies early; the rejection is still there for those who are.
    this.ready.catch(() => undefined);
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  /** Its exit has not been seen yet (a SIGSTOPped child is still alive). */
  get alive(): boolean {
    return this.exit === undefined;
  }

  kill(signal: NodeJS.Signals): void {
    if (!this.alive) return;
    try {
      process.kill(this.pid, signal);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
    }
  }

  /** An IPC round trip; the child answers with the value or the error. */
  request<T = unknown>(request: R | CallRequest, timeoutMs = this.requestTimeoutMs): Promise<T> {
    if (!this.alive) return Promise.reject(new Error(`${this.describe()} has exited`));
    const id = this.nextRequestId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${this.describe()} did not answer ${JSON.stringify(request)} within ${timeoutMs} ms`));
      }, timeoutMs);
      const settle =
        <V>(fn: (value: V) => void) =>
        (value: V) => {
          clearTimeout(timer);
          fn(value);
        };
      this.pending.set(id, { resolve: settle(resolve), reject: settle(reject) });
      this.child.send({ ...request, id }, (error) => {
        if (error) this.pending.get(id)?.reject(error);
      });
    });
  }

  /** `service.method(...args)` on a provider of the child's app, e.g. `call('WorkerService', 'stats')`. */
  call<T = unknown>(service: string, method: string, ...args: unknown[]): Promise<T> {
    return this.request<T>({ type: 'call', service, method, args });
  }

  /** SIGTERM (graceful: Nest's shutdown hooks run), SIGKILL if it has not exited within `timeoutMs`. */
  async stop(timeoutMs = 5_000): Promise<WorkerExit> {
    if (this.alive) {
      this.kill('SIGTERM');
      this.kill('SIGCONT');
      const timer = setTimeout(() => this.kill('SIGKILL'), timeoutMs);
      await this.exited;
      clearTimeout(timer);
    }
    return this.exited;
  }

  outputTail(lines = 60): string {
    return this.output.slice(-lines).join('\n');
  }

  private describe(): string {
    return `Worker process ${this.label} (pid ${this.pid}, ${this.workerId})`;
  }

  private capture(line: string): void {
    this.output.push(line);
    if (this.output.length > MAX_OUTPUT_LINES) this.output.splice(0, this.output.length - MAX_OUTPUT_LINES);
  }
}

/** SIGKILLs every child still running and waits for them; the next test (or bench scenario) starts with none. */
export async function stopAllWorkerProcesses(): Promise<void> {
  const workers = started.splice(0);
  for (const worker of workers) worker.kill('SIGKILL');
  await Promise.all(workers.map((worker) => worker.exited));
}

/** The captured output of every child of the current test, for a failure report. */
export function workerOutput(): string {
  return started.map((worker) => `--- ${worker.label} (pid ${worker.pid}, ${worker.workerId}) ---\n${worker.outputTail()}`).join('\n');
}

/**
 * Wraps a test body so that when it fails, the children's output is appended to its error:
 * `it('...', withWorkerOutputOnFailure(async () => { ... }))`.
 */
export function withWorkerOutputOnFailure(body: () => Promise<void>): () => Promise<void> {
  return async () => {
    try {
      await body();
    } catch (error) {
      const output = workerOutput();
      if (error instanceof Error && output) error.message += `\n\nWorker process output:\n${output}`;
      throw error;
    }
  };
}

function killChildrenOnExit(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const worker of started) worker.kill('SIGKILL');
  });
}
