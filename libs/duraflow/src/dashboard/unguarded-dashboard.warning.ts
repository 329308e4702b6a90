import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { DASHBOARD_OPTIONS, ResolvedDashboardOptions } from './dashboard.options';

/**
 * A dashboard mounted without guards lets anyone who reaches the app read every task and cancel,
 * signal, retry and resume them. That is right only when the host's own authentication stands in
 * front of it, which the module cannot see: it says so once at boot, unless `behindHostAuth`
 * says the host has it covered.
 */
@Injectable()
export class UnguardedDashboardWarning implements OnModuleInit {
  private readonly logger = new Logger('DuraflowDashboard');

  constructor(@Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions) {}

  onModuleInit(): void {
    if (this.options.guards.length > 0 || this.options.behindHostAuth) return;
    this.logger.warn(
      `The dashboard at ${this.options.path} has no guards: anyone who reaches this app can read every task and cancel, ` +
        `signal, retry and resume them. Give DuraflowDashboardModule.forRoot({ guards: [YourAuthGuard] }), or ` +
        `behindHostAuth: true when the app's own authentication (a global guard, an authenticating proxy) already stands in front of it.`,
    );
  }
}
