import { CanActivate, ExecutionContext, HttpException, Inject, Injectable } from '@nestjs/common';
import { DASHBOARD_OPTIONS, ResolvedDashboardOptions } from './dashboard.options';

/** 421: the request names a host this server does not answer to as. */
const MISDIRECTED_REQUEST = 421;

/**
 * With `allowedHosts`, every dashboard route answers only requests whose `Host` is one of them;
 * another gets 421 Misdirected Request before the host's guards run. A browser sends the name it
 * resolved, so a page of another site whose name was made to resolve to this server (DNS
 * rebinding) names its own host, and the same-origin check alone (Origin against Host) cannot
 * tell it from this dashboard's own page.
 */
@Injectable()
export class AllowedHostGuard implements CanActivate {
  constructor(@Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions) {}

  canActivate(context: ExecutionContext): boolean {
    const allowed = this.options.allowedHosts;
    if (!allowed) return true;
    const header = context.switchToHttp().getRequest<{ headers: Record<string, string | string[] | undefined> }>().headers.host;
    const host = Array.isArray(header) ? header[0] : header;
    if (host === undefined || isAllowedHost(host, allowed)) return true;
    throw new HttpException(
      'This dashboard does not answer to the host name this request was sent to. Open it at its own address ' +
        '(its allowedHosts option lists the names it answers to).',
      MISDIRECTED_REQUEST,
    );
  }
}

/** Whether a `Host` header is one of `allowed` (lower case; an entry without a port allows any port). */
export function isAllowedHost(host: string, allowed: readonly string[]): boolean {
  const lower = host.trim().toLowerCase();
  const name = /^(\[[^\]]*\]|[^:]*)(:\d+)?$/.exec(lower)?.[1];
  return name !== undefined && name !== '' && allowed.some((entry) => entry === lower || entry === name);
}
