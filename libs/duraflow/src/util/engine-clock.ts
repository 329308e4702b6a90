import { DuraflowClock } from '../domain/engine-clock';
import { sleep } from './sleep';

/** The engine's clock in production: the system clock and Node's timers. */
export const SYSTEM_CLOCK: DuraflowClock = {
  now: () => Date.now(),
  sleep,
};
