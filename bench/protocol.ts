import type { DuraflowModuleOptions } from '@duraflow/nestjs';

/** The env variable a bench worker process reads its configuration from (JSON). */
export const BENCH_WORKER_CONFIG_ENV = 'DURAFLOW_BENCH_WORKER_CONFIG';

/** DuraflowModule options as they cross the process boundary: JSON only, no workflows. */
export type BenchDuraflowOptions = Omit<DuraflowModuleOptions, 'workflows'> & { workerId: string };

export interface BenchWorkerConfig {
  databaseUrl: string;
  duraflow: BenchDuraflowOptions;
}

/** Parent -> child. */
export type BenchRequest =
  | { type: 'start-worker' }
  | { type: 'stop-worker' }
  | { type: 'stats' }
  /** `process.memoryUsage()`, after a full GC when `gc` is set (the child needs --expose-gc). */
  | { type: 'memory'; gc?: boolean }
  | { type: 'is-leader' }
  /** Statements sent so far, by name (bench/query-counter.ts). */
  | { type: 'query-counts' }
  /** `process.cpuUsage()` (µs). */
  | { type: 'cpu' };

export interface BenchWorkerStats {
  state: string;
  claimed: number;
  completed: number;
  failed: number;
  running: number;
}

export interface ReadyMessage {
  type: 'ready';
  workerId: string;
  /** Process start to app bootstrapped, as the child measured it. */
  bootMs: number;
}

export interface ReplyMessage {
  type: 'reply';
  id: number;
  ok: boolean;
  value?: unknown;
  error?: { name: string; message: string; stack?: string };
}

export type BenchChildMessage = ReadyMessage | ReplyMessage;
