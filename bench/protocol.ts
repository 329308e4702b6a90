import type { WorkerConfig, WorkerDuraflowOptions } from '../test/support/worker-ipc';

/** DuraflowModule options as they cross the process boundary: JSON only, no workflows. */
export type BenchDuraflowOptions = WorkerDuraflowOptions & { workerId: string };

export type BenchWorkerConfig = WorkerConfig;

/** Parent -> child, besides calls to the library's services (test/support/worker-ipc.ts). */
export type BenchRequest =
  /** `process.memoryUsage()`, after a full GC when `gc` is set (the child needs --expose-gc). */
  | { type: 'memory'; gc?: boolean }
  /** Statements sent so far, by name (bench/query-counter.ts). */
  | { type: 'query-counts' }
  /** `process.cpuUsage()` (µs). */
  | { type: 'cpu' };
