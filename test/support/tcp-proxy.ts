import { ChildProcess, fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { runInThisContext } from 'node:vm';
import { SERVER_URL } from './database';
import { sleep } from './waiting';

const PROXY_ENTRY = path.join(__dirname, 'tcp-proxy-main.js');
const START_TIMEOUT_MS = 10_000;
/** How long `restart()` keeps trying while the port is still held (e.g. by a socket closing). */
const REBIND_TIMEOUT_MS = 10_000;

export interface TcpProxyOptions {
  /** Default the run's PostgreSQL's host (SERVER_URL: DATABASE_URL, or the server the global setup started). */
  targetHost?: string;
  /** Default the run's PostgreSQL's port. */
  targetPort?: number;
}

type ProxyMessage = { type: 'listening'; port: number } | { type: 'error'; code?: string; message: string };

/** Every proxy not torn down yet: SIGKILLed when the test process exits, whatever happened. */
const live = new Set<TcpProxy>();
let exitHookInstalled = false;

/**
 * A TCP proxy in a child process (test/support/tcp-proxy-main.js) on 127.0.0.1:<port>, piping
 * to the target (the run's PostgreSQL by default). `stop()` SIGKILLs the process, so every
 * proxied connection drops at once and new ones are refused (the server is "unreachable");
 * `restart()` listens again on the same port. The shared server itself is never touched.
 * Always `teardown()` it (afterEach/afterAll); the child also exits when its parent goes away.
 */
export class TcpProxy {
  private child: ChildProcess | undefined;
  private exited: Promise<void> | undefined;
  private output = '';

  private constructor(
    private readonly listenPort: number,
    readonly targetHost: string,
    readonly targetPort: number,
  ) {}

  /** Starts a proxy on a free port below the ephemeral range (so no outgoing socket takes it while it is down). */
  static async start(options: TcpProxyOptions = {}): Promise<TcpProxy> {
    installExitHook();
    const [low, high] = portRange();
    let lastError: unknown;
    for (let attempt = 0; attempt < 20; attempt++) {
      const proxy = new TcpProxy(
        low + Math.floor(Math.random() * (high - low)),
        options.targetHost ?? runServer().hostname.replace(/^\[|\]$/g, ''),
        options.targetPort ?? Number(runServer().port || 5432),
      );
      live.add(proxy);
      try {
        await proxy.spawn();
        return proxy;
      } catch (error) {
        lastError = error;
        await proxy.teardown();
        if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
      }
    }
    throw lastError;
  }

  get port(): number {
    return this.listenPort;
  }

  /** The proxy process is up (between start/restart and stop). */
  get running(): boolean {
    return this.child !== undefined;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** `url` (e.g. a PostgreSQL connection string) with its host and port pointed at this proxy. */
  proxiedUrl(url: string): string {
    const parsed = new URL(url);
    parsed.hostname = '127.0.0.1';
    parsed.port = String(this.listenPort);
    return parsed.toString();
  }

  /** SIGKILLs the proxy process and waits until it is gone: its connections are dropped, new ones refused. */
  async stop(): Promise<void> {
    const child = this.child;
    const exited = this.exited;
    this.child = undefined;
    this.exited = undefined;
    if (!child) return;
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  }

  /** Listens again on the same port; resolves once it accepts connections. */
  async restart(): Promise<void> {
    if (this.child) return;
    const deadline = Date.now() + REBIND_TIMEOUT_MS;
    for (;;) {
      try {
        return await this.spawn();
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE' || Date.now() > deadline) throw error;
        await sleep(100);
      }
    }
  }

  /** Stops the process (if running); the proxy cannot be restarted afterwards. Never throws. */
  async teardown(): Promise<void> {
    await this.stop().catch(() => undefined);
    live.delete(this);
  }

  /** What the child printed (for a failure report). */
  get log(): string {
    return this.output;
  }

  private spawn(): Promise<void> {
    const child = fork(PROXY_ENTRY, [String(this.listenPort), this.targetHost, String(this.targetPort)], {
      execArgv: [],
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    const exited = new Promise<number | null>((resolve) => {
      child.once('exit', (code) => resolve(code));
      // A fork that could not start emits 'error' and no 'exit'.
      child.once('error', () => {
        if (child.pid === undefined) resolve(null);
      });
    });
    this.child = child;
    this.exited = exited.then(() => undefined);
    // However it goes, a process that is gone is forgotten (stop() then has nothing to do).
    void exited.then(() => {
      if (this.child === child) {
        this.child = undefined;
        this.exited = undefined;
      }
    });
    const capture = (chunk: Buffer) => {
      this.output = (this.output + chunk.toString()).slice(-10_000);
    };
    child.stdout!.on('data', capture);
    child.stderr!.on('data', capture);

    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const settle = (error?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        child.off('message', onMessage);
        if (!error) return resolve();
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        void exited.then(() => reject(error));
      };
      const onMessage = (message: ProxyMessage) => {
        if (message.type === 'listening') settle();
        else settle(addressError(this.listenPort, message.message, message.code));
      };
      const timer = setTimeout(
        () => settle(new Error(`the TCP proxy did not listen on port ${this.listenPort} within ${START_TIMEOUT_MS} ms\n${this.output}`)),
        START_TIMEOUT_MS,
      );
      child.on('message', onMessage);
      void exited.then((code) =>
        settle(
          code === EXIT_ADDRESS_IN_USE
            ? addressError(this.listenPort, 'address in use', 'EADDRINUSE')
            : new Error(`the TCP proxy exited (code ${code}) before it listened on port ${this.listenPort}\n${this.output}`),
        ),
      );
    });
  }
}

/** tcp-proxy-main.js exits with this code when its port is taken. */
const EXIT_ADDRESS_IN_USE = 98;

function addressError(port: number, message: string, code?: string): Error {
  return Object.assign(new Error(`the TCP proxy could not listen on port ${port}: ${message}`), { code });
}

/** Ports below the kernel's ephemeral range, where outgoing connections never land. */
function portRange(): [number, number] {
  let ephemeralLow = 32768;
  try {
    ephemeralLow = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || ephemeralLow;
  } catch {
    // Not Linux: keep the usual default.
  }
  const high = Math.max(11_000, Math.min(ephemeralLow, 32768));
  return [Math.max(10_000, high - 12_000), high];
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // Jest hands test files a copy of `process` whose events never fire: hook the real one.
  const realProcess = runInThisContext('process') as NodeJS.Process;
  realProcess.once('exit', () => {
    for (const proxy of live) {
      const pid = proxy.pid;
      if (pid !== undefined) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Already gone.
        }
      }
    }
  });
}

/** The run's PostgreSQL server, which a proxy targets unless told otherwise. */
function runServer(): URL {
  return new URL(SERVER_URL);
}
