import { DuraflowError } from './duraflow.error';

/** Boot-time: a DuraflowDashboardModule option is out of range. */
export class InvalidDashboardOptionsError extends DuraflowError {
  readonly code = 'INVALID_DASHBOARD_OPTIONS';
  constructor(
    readonly option: string,
    reason: string,
  ) {
    super(`DuraflowDashboardModule option "${option}" ${reason}`);
  }
}
