import { DynamicModule, Module } from '@nestjs/common';
import { mountDashboardController } from './dashboard.controller';
import { mountDashboardOperateController } from './dashboard-operate.controller';
import { mountDashboardCallbacksController } from './dashboard-callbacks.controller';
import { mountDashboardOverviewController } from './dashboard-overview.controller';
import { mountDashboardEventsController } from './dashboard-events.controller';
import { DASHBOARD_OPTIONS, DuraflowDashboardOptions, resolveDashboardOptions } from './dashboard.options';
import { DashboardReader } from './dashboard-reader';
import { DashboardReplies } from './dashboard-replies';
import { DashboardResponder } from './dashboard-responder';
import { LiveTaskFeed } from './live-task-feed';
import { SameOriginGuard } from './same-origin.guard';
import { AllowedHostGuard } from './allowed-host.guard';
import { NulCharacterGuard } from './nul-character.guard';
import { UnguardedDashboardWarning } from './unguarded-dashboard.warning';

/**
 * The operator's web UI, served by the host app: tasks with filters and counts, a task's step
 * timeline with live updates, and confirmed actions (cancel, cancel with compensation, retry or
 * discard a dead letter, retry a task, fork it from a step, cancel, retry or resume every task a
 * list's filters match) through WorkflowService and SagaService. Import it next to
 * DuraflowModule (whose services it uses); everything it serves is rendered on the server from
 * this package, nothing is fetched from elsewhere.
 */
@Module({})
export class DuraflowDashboardModule {
  /**
   * Mounts the dashboard at `path` behind `guards`. Checks the options at once
   * (InvalidDashboardOptionsError). Without guards it warns at boot, unless `behindHostAuth`.
   */
  static forRoot(options: DuraflowDashboardOptions = {}): DynamicModule {
    const resolved = resolveDashboardOptions(options);
    return {
      module: DuraflowDashboardModule,
      imports: resolved.imports,
      controllers: [
        mountDashboardController(resolved),
        mountDashboardOperateController(resolved),
        mountDashboardCallbacksController(resolved),
        mountDashboardOverviewController(resolved),
        mountDashboardEventsController(resolved),
      ],
      providers: [
        { provide: DASHBOARD_OPTIONS, useValue: resolved },
        DashboardReader,
        DashboardResponder,
        DashboardReplies,
        LiveTaskFeed,
        SameOriginGuard,
        AllowedHostGuard,
        NulCharacterGuard,
        UnguardedDashboardWarning,
      ],
    };
  }
}
