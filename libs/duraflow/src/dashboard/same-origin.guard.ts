import { CanActivate, ExecutionContext, ForbiddenException, Injectable } from '@nestjs/common';

type Headers = Record<string, string | string[] | undefined>;

/**
 * CSRF protection of the dashboard's actions (every one is a POST): a request another site
 * made a browser send is refused. Browsers say where a request comes from, and no page can
 * forge it: `Sec-Fetch-Site` (every current browser) must be `same-origin` (or `none`: typed
 * or bookmarked by the user); without it, `Origin` must name this host. A request with neither
 * header does not come from a browser page, so it cannot be forged by one, and passes (the
 * host's guards still decide who may act). This is the check of Go's CrossOriginProtection.
 */
@Injectable()
export class SameOriginGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ headers: Headers }>();
    const refusal = crossSiteRefusal(request.headers);
    if (refusal) throw new ForbiddenException(refusal);
    return true;
  }
}

/** Why this request must be refused as cross-site, or undefined when it may go on. */
export function crossSiteRefusal(headers: Headers): string | undefined {
  const header = (name: string) => {
    const value = headers[name];
    return Array.isArray(value) ? value[0] : value;
  };
  const refused = 'This action was sent from another site and was refused. Open the dashboard itself and act from there.';
  const site = header('sec-fetch-site');
  if (site !== undefined) return site === 'same-origin' || site === 'none' ? undefined : refused;
  const origin = header('origin');
  if (origin === undefined) return undefined;
  let originHost: string;
  try {
    originHost = new URL(origin).host;
  } catch {
    return refused;
  }
  return originHost !== '' && originHost.toLowerCase() === (header('host') ?? '').toLowerCase() ? undefined : refused;
}
