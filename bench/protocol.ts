import type { WorkerConfig, WorkerDuraflowOptions } from '../test/support/worker-ipc';

/** DuraflowModule options as they cross the process boundary: JSON only, no workflows. */
export type BenchDuraflowOptions = WorkerDuraflowOptions & { workerId: string };

export interface BenchWorkerConfig extends WorkerConfig {
  /**
   * Register only this flow-control workflow (bench/workflows.ts FLOW_WORKFLOWS) instead of the
   * usual ones: the flow-control drains (a process that registers a limited workflow claims
   * through the limited claim, which the other drains must not pay for).
   */
  flowWorkflow?: FlowBenchWorkflow;
}

export type FlowBenchWorkflow = 'bench-capped' | 'bench-capped-100' | 'bench-keyed';

/** Parent -> child, besides calls to the library's services (test/support/worker-ipc.ts). */
export type BenchRequest =
  /** `process.memoryUsage()`, after a full GC when `gc` is set (the child needs --expose-gc). */
  | { type: 'memory'; gc?: boolean }
  /** Statements sent so far, by name (bench/query-counter.ts). */
  | { type: 'query-counts' }
  /** `process.cpuUsage()` (µs). */
  | { type: 'cpu' };
