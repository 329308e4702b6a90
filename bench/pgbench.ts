import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface PgbenchResult {
  clients: number;
  seconds: number;
  tps: number;
  transactions: number;
  latencyMs: number;
  command: string;
}

/**
 * `pgbench -n -T <seconds> -c N -j N -M prepared -f <script>` against the database of `url`:
 * no vacuum, prepared statements, the server's own synchronous_commit.
 */
export async function pgbench(url: string, script: string, clients: number, seconds: number): Promise<PgbenchResult> {
  const parsed = new URL(url);
  const dir = mkdtempSync(path.join(tmpdir(), 'duraflow-pgbench-'));
  const scriptFile = path.join(dir, 'script.sql');
  writeFileSync(scriptFile, `${script.trim()}\n`);
  const args = [
    '-h',
    parsed.hostname || '127.0.0.1',
    '-p',
    parsed.port || '5432',
    '-U',
    decodeURIComponent(parsed.username || 'postgres'),
    '-n',
    '-T',
    String(seconds),
    '-c',
    String(clients),
    '-j',
    String(clients),
    '-M',
    'prepared',
    '-f',
    scriptFile,
    decodeURIComponent(parsed.pathname.slice(1)),
  ];
  const env = { ...process.env, ...(parsed.password ? { PGPASSWORD: decodeURIComponent(parsed.password) } : {}) };
  try {
    const { stdout } = await run('pgbench', args, { env, maxBuffer: 1 << 20 });
    const tps = /tps = ([\d.]+)/.exec(stdout);
    const transactions = /number of transactions actually processed: (\d+)/.exec(stdout);
    const latency = /latency average = ([\d.]+) ms/.exec(stdout);
    if (!tps || !transactions) throw new Error(`Could not read pgbench's output:\n${stdout}`);
    return {
      clients,
      seconds,
      tps: Number(tps[1]),
      transactions: Number(transactions[1]),
      latencyMs: latency ? Number(latency[1]) : NaN,
      command: `pgbench ${args.slice(6, -1).join(' ').replace(scriptFile, '<script>')}`,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
