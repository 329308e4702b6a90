import { isIP } from 'node:net';
import { DuraflowErrorResponse } from '@duraflow/nestjs';
import { isLoopback } from '../net/listen-address';

/** Nest's HttpStatus has no name for it. */
const MISDIRECTED_REQUEST = 421;

/** The engine's settings the check reads. */
export interface AllowedHostsConfig {
  /** DURAFLOW_ALLOWED_HOSTS, lower case: `name` (any port) or `name:port`. */
  allowedHosts: string[];
  apiKey: string | undefined;
  /** HOST: a name given there is one the engine answers to. */
  host: string;
}

interface HostRequest {
  headers: Record<string, string | string[] | undefined>;
}
interface HostResponse {
  status(code: number): HostResponse;
  json(body: unknown): void;
}

/**
 * Which `Host` names the engine answers to, checked before any route (the dashboard, the API,
 * the health check). A browser sends the name it resolved: a page of another site that makes
 * its own name resolve to this machine (DNS rebinding) reaches a loopback-bound engine with
 * `Host: <that name>`, and would otherwise read and act on it as if it were this engine's own
 * page. Accepted: an IP address (no rebinding sends one), `localhost`, the name HOST gives, and
 * DURAFLOW_ALLOWED_HOSTS. With DURAFLOW_API_KEY set and no DURAFLOW_ALLOWED_HOSTS, any host:
 * the key protects the engine, and its name is the deployment's business. Anything else gets
 * 421 Misdirected Request. A request with no `Host` (HTTP/1.0) comes from no browser and passes.
 */
export function allowedHostsMiddleware(
  config: AllowedHostsConfig,
): (request: HostRequest, response: HostResponse, next: () => void) => void {
  const configured = [...config.allowedHosts, ...(isIP(config.host) ? [] : [config.host.toLowerCase()])];
  const open = config.apiKey !== undefined && config.allowedHosts.length === 0;
  return (request, response, next) => {
    const header = request.headers.host;
    const host = Array.isArray(header) ? header[0] : header;
    if (open || host === undefined || isAllowedHost(host, configured)) return next();
    const body: DuraflowErrorResponse = {
      statusCode: MISDIRECTED_REQUEST,
      code: 'MISDIRECTED_REQUEST',
      message:
        'This engine does not answer to the host name this request was sent to. Reach it by IP address or localhost, ' +
        'or add the name to DURAFLOW_ALLOWED_HOSTS (comma-separated) on the engine.',
      details: {},
    };
    response.status(MISDIRECTED_REQUEST).json(body);
  };
}

/** Whether a `Host` header names an IP address, localhost, or one of `configured` (an entry without a port allows any). */
export function isAllowedHost(host: string, configured: readonly string[]): boolean {
  const lower = host.trim().toLowerCase();
  const match = /^(\[([^\]]*)\]|[^:]*)(:\d+)?$/.exec(lower);
  if (!match || match[1] === '') return false;
  const bare = match[2] ?? match[1];
  if (isIP(bare) !== 0 || isLoopback(bare)) return true;
  return configured.some((entry) => entry === lower || entry === match[1]);
}
