import type * as ClassTransformer from 'class-transformer';
import type * as ClassValidator from 'class-validator';
import type * as Ioredis from 'ioredis';
import type * as OpenTelemetryApi from '@opentelemetry/api';
import type * as PromClient from 'prom-client';
import { MissingDependencyError } from '../domain/errors';

/**
 * The optional peers, loaded when the feature they serve is first used and never when the module
 * loads: an application that does not use the feature need not install them. Only `import type`
 * of them appears elsewhere, so neither the JavaScript nor the shipped .d.ts name them.
 */

/** ioredis, for the `redis` option. */
export function loadIoredis(): typeof Ioredis {
  const [ioredis] = requireInstalled(['ioredis'], 'The DuraflowModule option "redis" (reaper leader election through Redis)');
  return ioredis as typeof Ioredis;
}

/** class-validator and class-transformer, for a workflow's `input` DTO. */
export function loadDtoValidation(workflowName: string): { validator: typeof ClassValidator; transformer: typeof ClassTransformer } {
  const [validator, transformer] = requireInstalled(
    ['class-validator', 'class-transformer'],
    `The "input" DTO of workflow "${workflowName}"`,
  );
  return { validator: validator as typeof ClassValidator, transformer: transformer as typeof ClassTransformer };
}

/** prom-client, for the `metrics` option. */
export function loadPromClient(): typeof PromClient {
  const [promClient] = requireInstalled(['prom-client'], 'The DuraflowModule option "metrics" (Prometheus metrics)');
  return promClient as typeof PromClient;
}

/**
 * @opentelemetry/api when the host installed it, else undefined: tracing is something a host turns
 * on by installing and configuring OpenTelemetry, never an error when it is absent.
 */
export function loadOpenTelemetryApi(): typeof OpenTelemetryApi | undefined {
  if (!isInstalled('@opentelemetry/api')) return undefined;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require('@opentelemetry/api') as typeof OpenTelemetryApi;
}

function requireInstalled(packageNames: string[], feature: string): unknown[] {
  const missing = packageNames.filter((name) => !isInstalled(name));
  if (missing.length) throw new MissingDependencyError(missing, feature);
  // Loaded only when the feature is used, so a host without the optional peer never loads it.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return packageNames.map((name) => require(name));
}

function isInstalled(packageName: string): boolean {
  try {
    require.resolve(packageName);
    return true;
  } catch (error) {
    if ((error as { code?: unknown }).code === 'MODULE_NOT_FOUND') return false;
    throw error;
  }
}
