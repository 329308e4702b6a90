import type * as ClassTransformer from 'class-transformer';
import type * as ClassValidator from 'class-validator';
import type * as Ioredis from 'ioredis';
import { MissingDependencyError } from '../errors';

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
