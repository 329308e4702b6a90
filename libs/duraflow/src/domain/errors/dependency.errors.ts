import { DuraflowError } from './duraflow.error';

/** A feature was used whose optional peer package is not installed (e.g. `redis` without ioredis). */
export class MissingDependencyError extends DuraflowError {
  readonly code = 'MISSING_DEPENDENCY';
  constructor(
    readonly packageNames: string[],
    readonly feature: string,
  ) {
    super(
      `${feature} needs ${packageNames.map((name) => `"${name}"`).join(' and ')}, which ` +
        `${packageNames.length > 1 ? 'are' : 'is'} not installed: run \`npm install ${packageNames.join(' ')}\`.`,
    );
  }
}
