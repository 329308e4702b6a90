import { DynamicModule, Module } from '@nestjs/common';
import { DuraflowDashboardModule } from '@duraflow/nestjs';
import { EngineConfig } from '../config/engine.config';
import { ENGINE_CONFIG } from '../config/engine-config.token';
import { DashboardLoginController } from './dashboard-login.controller';
import { DASHBOARD_LOGIN_PATH, DASHBOARD_PATH } from './dashboard-session';
import { DashboardSessions } from './dashboard-sessions';
import { SignInThrottle } from './sign-in-throttle';

/**
 * The library's dashboard at /duraflow. The engine's API-key guard is global (APP_GUARD), so it
 * already stands in front of every dashboard route; with a key set, a browser signs in through
 * the login form (DashboardLoginController) and carries a session cookie, whose session
 * (DashboardSessions, exported for the guard) lives in this process.
 */
@Module({})
export class EngineDashboardModule {
  static forConfig(config: EngineConfig): DynamicModule {
    return {
      module: EngineDashboardModule,
      // The API-key guard is global: the engine's own authentication stands in front of the dashboard.
      imports: [
        DuraflowDashboardModule.forRoot({
          path: DASHBOARD_PATH,
          loginUrl: config.apiKey ? DASHBOARD_LOGIN_PATH : undefined,
          behindHostAuth: true,
        }),
      ],
      controllers: [DashboardLoginController],
      providers: [{ provide: ENGINE_CONFIG, useValue: config }, DashboardSessions, SignInThrottle],
      exports: [DashboardSessions],
    };
  }
}
