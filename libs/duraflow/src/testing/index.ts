/** `@duraflow/nestjs/testing`: workflows under test, with a virtual clock and injected faults. */
export { createDuraflowTestEnv, DuraflowTestEnv, DuraflowTestEnvOptions, ProviderOverride } from './test-env';
export { VirtualClock } from './virtual-clock';
export { Duration, durationMs } from './duration';
export { FailStepOptions } from './fault-plan';
export { StepBody } from '../execution/step-faults';
export { DuraflowClock } from '../domain/engine-clock';
