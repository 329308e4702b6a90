import { InvalidDuraflowOptionsError } from '../domain/errors';

/**
 * A prom-client `Registry`, typed by what Duraflow uses of it, so the package's types do not
 * name prom-client (an optional peer).
 */
export interface DuraflowMetricsRegistry {
  readonly contentType: string;
  metrics(): Promise<string>;
  removeSingleMetric(name: string): void;
}

/** `DuraflowModule.forRoot({ metrics })`: Prometheus metrics through prom-client (an optional peer). */
export interface DuraflowMetricsOptions {
  /** The prom-client Registry the metrics go in. Default: prom-client's global `register`. */
  registry?: DuraflowMetricsRegistry;
  /** Put before every metric's name. Default `duraflow_`. */
  prefix?: string;
}

export interface ResolvedMetricsOptions {
  registry: DuraflowMetricsRegistry | undefined;
  prefix: string;
}

export const DEFAULT_METRICS_PREFIX = 'duraflow_';

/** `metrics` off (absent or false: the default), or on with its defaults applied; checked. */
export function resolveMetricsOptions(metrics: boolean | DuraflowMetricsOptions | undefined): ResolvedMetricsOptions | null {
  if (metrics === undefined || metrics === false) return null;
  if (metrics !== true && (typeof metrics !== 'object' || metrics === null)) {
    throw new InvalidDuraflowOptionsError('metrics', 'must be true, false or { registry?, prefix? }.');
  }
  const { registry, prefix = DEFAULT_METRICS_PREFIX } = metrics === true ? {} : metrics;
  if (typeof prefix !== 'string' || !/^[a-zA-Z_:][a-zA-Z0-9_:]*$|^$/.test(prefix)) {
    throw new InvalidDuraflowOptionsError(
      'metrics.prefix',
      `must be letters, digits, "_" or ":" (not starting with a digit), got ${String(prefix)}.`,
    );
  }
  if (registry !== undefined && (typeof registry !== 'object' || registry === null || typeof registry.metrics !== 'function')) {
    throw new InvalidDuraflowOptionsError('metrics.registry', 'must be a prom-client Registry.');
  }
  return { registry, prefix };
}
