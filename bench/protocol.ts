import type { WorkerChildMessage, WorkerConfig, WorkerDuraflowOptions } from '../test/support/worker-ipc';

/** The env variable a bench worker process reads its configuration from (JSON). */
export const BENCH_WORKER_CONFIG_ENV = 'DURAFLOW_BENCH_WORKER_CONFIG';

/** DuraflowModule options as they cross the process boundary: JSON only, no workflows. */
export type BenchDuraflowOptions = WorkerDuraflowOptions & { workerId: string };

export type BenchWorkerConfig = WorkerConfig;

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

export type BenchChildMessage = WorkerChildMessage;
