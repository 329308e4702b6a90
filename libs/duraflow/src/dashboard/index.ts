export { DuraflowDashboardModule } from './dashboard.module';
export { DuraflowDashboardOptions, ResolvedDashboardOptions, resolveDashboardOptions } from './dashboard.options';
