import { collectDefaultMetrics, Registry } from 'prom-client';
import type { DuraflowMetricsOptions } from '@duraflow/nestjs';

/** The engine's metrics: Duraflow's and the Node.js process's defaults, in a registry of its own (one per engine in a process). */
export function engineMetricsOptions(): DuraflowMetricsOptions {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return { registry };
}
