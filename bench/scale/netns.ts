import { execFileSync } from 'node:child_process';

/**
 * Network namespaces standing in for separate hosts: `df-scale-<n>`, each joined to the root
 * namespace (where PostgreSQL listens) by a veth pair 10.200.<n>.1 (root side) <-> 10.200.<n>.2,
 * with `tc netem delay` on both ends when the kernel has sch_netem (`netem` says whether it did),
 * so a round trip costs twice the delay; without it the caller adds the delay (delay-proxy.ts). Needs root.
 * `removeAll()` deletes them (and their veth pairs); it runs on exit and on SIGINT/SIGTERM too.
 */
export class Namespaces {
  private readonly names: string[] = [];
  /** Whether the delay is added by `tc netem` (false: the kernel has no sch_netem). */
  netem = true;

  constructor(private readonly delayMs: number) {
    process.once('exit', () => this.removeAll());
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.once(signal, () => {
        this.removeAll();
        process.exit(130);
      });
    }
  }

  /** The namespace of node `n` (1-based), created on first use; returns its name and the database host seen from it. */
  create(n: number): { name: string; dbHost: string } {
    const name = `df-scale-${n}`;
    const root = `dfs${n}r`;
    const inner = `dfs${n}n`;
    remove(name, root);
    ip('netns', 'add', name);
    this.names.push(name);
    ip('link', 'add', root, 'type', 'veth', 'peer', 'name', inner);
    ip('link', 'set', inner, 'netns', name);
    ip('addr', 'add', `10.200.${n}.1/24`, 'dev', root);
    ip('link', 'set', root, 'up');
    ip('netns', 'exec', name, 'ip', 'addr', 'add', `10.200.${n}.2/24`, 'dev', inner);
    ip('netns', 'exec', name, 'ip', 'link', 'set', inner, 'up');
    ip('netns', 'exec', name, 'ip', 'link', 'set', 'lo', 'up');
    if (this.delayMs > 0 && this.netem) {
      try {
        execFileSync('tc', ['qdisc', 'add', 'dev', root, 'root', 'netem', 'delay', `${this.delayMs}ms`], { stdio: 'ignore' });
        ip('netns', 'exec', name, 'tc', 'qdisc', 'add', 'dev', inner, 'root', 'netem', 'delay', `${this.delayMs}ms`);
      } catch {
        this.netem = false;
      }
    }
    return { name, dbHost: `10.200.${n}.1` };
  }

  /** The command prefix that runs a program inside namespace `name`. */
  static launcher(name: string): string[] {
    return ['/usr/sbin/ip', 'netns', 'exec', name];
  }

  removeAll(): void {
    for (const name of this.names.splice(0)) remove(name, `dfs${name.split('-').pop()}r`);
  }
}

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

function remove(name: string, rootLink: string): void {
  try {
    execFileSync('ip', ['link', 'del', rootLink], { stdio: 'ignore' });
  } catch {
    // not there
  }
  try {
    execFileSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
  } catch {
    // not there
  }
}
