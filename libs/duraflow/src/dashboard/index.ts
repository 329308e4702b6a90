// `@duraflow/nestjs/dashboard`: the dashboard module and its options (the module is also at the package root).
export { DuraflowDashboardModule } from './dashboard.module';
export { DuraflowDashboardOptions, ResolvedDashboardOptions, resolveDashboardOptions } from './dashboard.options';
