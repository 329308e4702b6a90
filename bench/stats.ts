import { readFileSync } from 'node:fs';
import os from 'node:os';

/** The q-quantile (0..1) of the samples, nearest rank. */
export function quantile(samples: number[], q: number): number {
  if (!samples.length) throw new Error('quantile of no samples');
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

export function median(samples: number[]): number {
  return quantile(samples, 0.5);
}

/** Progress lines go to stderr, so stdout holds only the table. */
export function progress(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

/** Busy and total CPU time of the whole machine so far (ms, summed over the cores). */
export function machineCpu(): { busy: number; total: number } {
  let busy = 0;
  let total = 0;
  for (const { times } of os.cpus()) {
    const used = times.user + times.nice + times.sys + times.irq;
    busy += used;
    total += used + times.idle;
  }
  return { busy, total };
}

/** Share of the machine's CPU time that was busy between two readings, in %. */
export function busyPercent(before: { busy: number; total: number }, after: { busy: number; total: number }): number {
  const total = after.total - before.total;
  return total > 0 ? (100 * (after.busy - before.busy)) / total : 0;
}

/** CPU time (user + system) between two `process.cpuUsage()` readings, in ms. */
export function cpuMs(before: NodeJS.CpuUsage, after: NodeJS.CpuUsage): number {
  return (after.user - before.user + after.system - before.system) / 1000;
}

/** Linux: user + system CPU time of a process so far, in ms (from /proc/<pid>/stat, 100 ticks a second); undefined elsewhere or once it is gone. */
export function processCpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The fields after the command name (which may hold spaces) start at state, field 3; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return undefined;
  }
}
