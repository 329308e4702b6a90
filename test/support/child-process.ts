import { ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { createInterface } from 'node:readline';
import {
  CHAOS_WORKER_CONFIG_ENV,
  ChaosChildMessage,
  ChaosDuraflowOptions,
  ChaosRequest,
  ChaosScenarioName,
  ChaosWorkerConfig,
} from '../chaos/protocol';

/** The require hook that lets a plain `node` run the project's TypeScript with decorator metadata. */
export const SWC_REGISTER = path.join(__dirname, 'swc-register.js');
export const CHAOS_WORKER_ENTRY = path.join(__dirname, '..', 'chaos', 'worker-main.ts');

export type WorkerSignal = 'SIGKILL' | 'SIGSTOP' | 'SIGCONT' | 'SIGTERM';

export interface WorkerProcessOptions {
  databaseUrl: string;
  /** Which workflows the worker registers (test/chaos/scenarios.ts). */
  scenario: ChaosScenarioName | ChaosScenarioName[];
  /** DuraflowModule options (JSON only: no functions). */
  duraflow?: ChaosDuraflowOptions;
  /** Default `chaos-<label>-<random>`; known before the child boots. */
  workerId?: string;
  /** Names the process in its captured output. Default 'worker'. */
  label?: string;
  /** Added to the child's environment. */
  env?: Record<string, string>;
  /** `ready` rejects if the child has not reported ready by then. Default 30 s. */
  readyTimeoutMs?: number;
}

export interface WorkerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface WorkerReady {
  workerId: string;
  /** Process start to app bootstrapped and worker started, measured by the child. */
  bootMs: number;
  /** fork() to the ready message, measured by the test. */
  startupMs: number;
}

/** A chaos worker process: a Nest app with DuraflowModule, driven over IPC. */
export interface WorkerProcess {
  readonly label: string;
  readonly pid: number;
  readonly workerId: string;
  /** Resolves when the app is bootstrapped and its worker started; rejects if the child dies first. */
  readonly ready: Promise<WorkerReady>;
  readonly exited: Promise<WorkerExit>;
  /** Its exit has not been seen yet (a SIGSTOPped child is still alive). */
  readonly alive: boolean;
  /** Captured stdout and stderr lines, prefixed with the label. */
  readonly output: string[];
  kill(signal: WorkerSignal): void;
  /** A generic IPC round trip; the child answers with the value or the error. */
  request<T = unknown>(request: ChaosRequest, timeoutMs?: number): Promise<T>;
  /** `request({ type: 'call', service, method, args })`, e.g. `call('WorkerService', 'stats')`. */
  call<T = unknown>(service: string, method: string, ...args: unknown[]): Promise<T>;
  /** SIGTERM (graceful: Nest's shutdown hooks run), SIGKILL if it has not exited within `timeoutMs`. */
  stop(timeoutMs?: number): Promise<WorkerExit>;
}

const MAX_OUTPUT_LINES = 400;

/** Every child started since the last stopAllWorkerProcesses(), exited ones included (their output matters). */
const started: ChildWorker[] = [];

class ChildWorker implements WorkerProcess {
  readonly output: string[] = [];
  readonly ready: Promise<WorkerReady>;
  readonly exited: Promise<WorkerExit>;
  private exit: WorkerExit | undefined;
  private nextRequestId = 1;
  private readonly pending = new Map<number, { resolve: (value: any) => void; reject: (error: Error) => void }>();

  constructor(
    private readonly child: ChildProcess,
    readonly label: string,
    readonly workerId: string,
    readyTimeoutMs: number,
  ) {
    const forkedAt = Date.now();
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

    this.ready = new Promise<WorkerReady>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${this.describe()} did not report ready within ${readyTimeoutMs} ms\n${this.outputTail()}`)),
        readyTimeoutMs,
      );
      timer.unref();
      child.on('message', (message: ChaosChildMessage) => {
        if (message.type === 'ready') {
          clearTimeout(timer);
          resolve({ workerId: message.workerId, bootMs: message.bootMs, startupMs: Date.now() - forkedAt });
        } else if (message.type === 'reply') {
          const waiter = this.pending.get(message.id);
          this.pending.delete(message.id);
          if (!waiter) return;
          if (message.ok) waiter.resolve(message.value);
          else waiter.reject(Object.assign(new Error(message.error?.message), { name: message.error?.name, childStack: message.error?.stack }));
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

  get alive(): boolean {
    return this.exit === undefined;
  }

  kill(signal: WorkerSignal): void {
    if (!this.alive) return;
    try {
      process.kill(this.pid, signal);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
    }
  }

  request<T = unknown>(request: ChaosRequest, timeoutMs = 10_000): Promise<T> {
    if (!this.alive) return Promise.reject(new Error(`${this.describe()} has exited`));
    const id = this.nextRequestId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${this.describe()} did not answer ${JSON.stringify(request)} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (value: T) => {
          clearTimeout(timer);
          resolve(value);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
      this.child.send({ ...request, id }, (error) => {
        if (error) this.pending.get(id)?.reject(error);
      });
    });
  }

  call<T = unknown>(service: string, method: string, ...args: unknown[]): Promise<T> {
    return this.request<T>({ type: 'call', service, method, args });
  }

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

/**
 * Forks test/chaos/worker-main.ts under the swc require hook. The child is SIGKILLed by
 * stopAllWorkerProcesses(), when the test process exits, or by itself when its IPC channel to
 * the test closes: it never outlives the test.
 */
export function startWorkerProcess(options: WorkerProcessOptions): WorkerProcess {
  killChildrenOnExit();
  const label = options.label ?? 'worker';
  const workerId = options.workerId ?? options.duraflow?.workerId ?? `chaos-${label}-${randomBytes(4).toString('hex')}`;
  const config: ChaosWorkerConfig = {
    databaseUrl: options.databaseUrl,
    scenarios: ([] as ChaosScenarioName[]).concat(options.scenario),
    duraflow: { ...options.duraflow, workerId },
  };
  const child = fork(CHAOS_WORKER_ENTRY, [], {
    execArgv: ['-r', SWC_REGISTER],
    env: { ...process.env, NO_COLOR: '1', [CHAOS_WORKER_CONFIG_ENV]: JSON.stringify(config), ...options.env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    serialization: 'advanced',
  });
  const worker = new ChildWorker(child, label, workerId, options.readyTimeoutMs ?? 30_000);
  started.push(worker);
  return worker;
}

/** SIGKILLs every child still running and waits for them; the next test starts with none. */
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

let exitHookInstalled = false;

function killChildrenOnExit(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const worker of started) worker.kill('SIGKILL');
  });
}
