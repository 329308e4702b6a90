import type { WorkerChildMessage, WorkerConfig, WorkerDuraflowOptions } from '../support/worker-ipc';

/** The scenarios a chaos worker can register (test/chaos/scenarios.ts). */
export type ChaosScenarioName = 'chaos-steps' | 'chaos-suicide' | 'chaos-saga';

/**
 * DuraflowModule options as they cross the process boundary (JSON): everything but the
 * functional workflows, which the child takes from its scenarios.
 */
export type ChaosDuraflowOptions = WorkerDuraflowOptions;

/** What the child entry reads from `CHAOS_WORKER_CONFIG`. */
export interface ChaosWorkerConfig extends WorkerConfig {
  scenarios: ChaosScenarioName[];
}

export const CHAOS_WORKER_CONFIG_ENV = 'CHAOS_WORKER_CONFIG';

/** Test -> child: call `method(...args)` on a provider of the child's app, by its exported class name. */
export interface CallRequest {
  type: 'call';
  /** A class exported by `@duraflow/nestjs`: 'WorkerService', 'ReaperService', 'WorkflowService', ... */
  service: string;
  method: string;
  args?: unknown[];
}

export type ChaosRequest = CallRequest;

export type ChaosChildMessage = WorkerChildMessage;
