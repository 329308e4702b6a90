import { ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** How the process is started beyond its command line. */
export interface ListeningProcessOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** In a process group of its own, as a shell runs a foreground job: `interrupt()` then acts as Ctrl-C. */
  detached?: boolean;
}

/**
 * `commandLine` (by default `node <args>`) in a process of its own, its output lines kept;
 * ready once a line matches `listening`, whose first group (the URL) `ready` resolves with.
 */
export class ListeningProcess {
  readonly output: string[] = [];
  /** Resolves with the URL once the process logs that it listens; rejects if it exits first. */
  readonly ready: Promise<string>;
  readonly exited: Promise<ProcessExit>;
  private readonly child: ChildProcess;

  constructor(what: string, commandLine: string[], options: ListeningProcessOptions, listening: RegExp) {
    const [command, ...args] = commandLine;
    this.child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    this.exited = new Promise((resolve) => this.child.once('exit', (code, signal) => resolve({ code, signal })));
    this.ready = new Promise((resolve, reject) => {
      for (const stream of [this.child.stdout!, this.child.stderr!]) {
        createInterface({ input: stream }).on('line', (line) => {
          this.output.push(line);
          const match = listening.exec(line);
          if (match) resolve(match[1]);
        });
      }
      void this.exited.then((exit) => reject(new Error(`${what} exited before it listened (${JSON.stringify(exit)}):\n${this.log}`)));
    });
    this.ready.catch(() => undefined);
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Everything it printed so far. */
  get log(): string {
    return this.output.join('\n');
  }

  kill(signal: NodeJS.Signals): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
  }

  /** Ctrl-C in a terminal: SIGINT to every process of the foreground group (needs `detached`). */
  interrupt(): void {
    process.kill(-this.pid, 'SIGINT');
  }

  /** SIGTERM, as `kill <pid>` or a container stop sends it (or another signal), and its exit. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<ProcessExit> {
    this.kill(signal);
    return this.exited;
  }
}
