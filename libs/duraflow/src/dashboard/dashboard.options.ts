import { CanActivate, ModuleMetadata, Type } from '@nestjs/common';
import { DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT } from '../domain/duraflow.constants';
import { InvalidDashboardOptionsError } from '../domain/errors';

/** The resolved options' injection token. */
export const DASHBOARD_OPTIONS = 'DURAFLOW_DASHBOARD_OPTIONS';

export interface DuraflowDashboardOptions {
  /** Where the dashboard is mounted, e.g. `/duraflow` (a global prefix is added in front). Default `/duraflow`. */
  path?: string;
  /**
   * The host's guards, run on every dashboard route: pages, live updates (SSE), the JSON of
   * large values and every action. Classes are created in the dashboard's module: give their
   * dependencies through `imports` (global modules need nothing).
   */
  guards?: Array<Type<CanActivate> | CanActivate>;
  /** Modules the guards' dependencies come from. */
  imports?: ModuleMetadata['imports'];
  /**
   * Says the dashboard needs no guards of its own because the host's authentication already
   * stands in front of it (a global guard, an authenticating proxy): silences the warning logged
   * at boot when `guards` is empty. Default false.
   */
  behindHostAuth?: boolean;
  /**
   * The `Host` names the dashboard answers to, e.g. `['ops.example.com', 'localhost:3000']` (a
   * name alone allows any port). A request naming another host gets 421 Misdirected Request on
   * every route: a page of another site that has its name resolve to this server (DNS rebinding)
   * can then neither read the dashboard nor act on it. Default: any host.
   */
  allowedHosts?: string[];
  /** Where an operator signs in: linked from the header and from the page a guard's refusal shows. */
  loginUrl?: string;
  /** Tasks per list page: 1 to 1000. Default 50. */
  pageSize?: number;
  /** Characters of an input, output or error shown on a page before the link to the whole value: 64 to 1,048,576. Default 2,048. */
  previewChars?: number;
  /** How often an open task page checks its task for changes, in ms: 100 to 60,000. Default 1,000. */
  liveIntervalMs?: number;
  /** The name in the header and the window title. Default `Duraflow`. */
  title?: string;
}

export interface ResolvedDashboardOptions {
  path: string;
  guards: Array<Type<CanActivate> | CanActivate>;
  imports: NonNullable<ModuleMetadata['imports']>;
  behindHostAuth: boolean;
  /** Lower case; undefined: any host. */
  allowedHosts: string[] | undefined;
  loginUrl: string | undefined;
  pageSize: number;
  previewChars: number;
  liveIntervalMs: number;
  title: string;
}

/** Literal path segments only: the dashboard's own routes are appended to it. */
const PATH_PATTERN = /^(\/[A-Za-z0-9._~-]+)+$/;

/** Defaults applied and every option checked (InvalidDashboardOptionsError), as forRoot does. */
export function resolveDashboardOptions(options: DuraflowDashboardOptions = {}): ResolvedDashboardOptions {
  const rawPath = options.path ?? '/duraflow';
  const path = typeof rawPath === 'string' ? `/${rawPath.replace(/^\/+|\/+$/g, '')}` : '';
  if (!PATH_PATTERN.test(path)) {
    throw new InvalidDashboardOptionsError(
      'path',
      `must be a path of literal segments such as "/duraflow" or "/ops/workflows" (not the root, no parameters or wildcards), got ${JSON.stringify(rawPath)}.`,
    );
  }
  const guards = options.guards ?? [];
  if (
    !Array.isArray(guards) ||
    guards.some((guard) => typeof guard !== 'function' && typeof (guard as CanActivate)?.canActivate !== 'function')
  ) {
    throw new InvalidDashboardOptionsError('guards', 'must be an array of guard classes or instances (objects with canActivate).');
  }
  const imports = options.imports ?? [];
  if (!Array.isArray(imports)) throw new InvalidDashboardOptionsError('imports', 'must be an array of modules.');
  if (options.behindHostAuth !== undefined && typeof options.behindHostAuth !== 'boolean') {
    throw new InvalidDashboardOptionsError('behindHostAuth', 'must be true or false.');
  }
  const loginUrl = options.loginUrl;
  if (loginUrl !== undefined && (typeof loginUrl !== 'string' || !/^(\/(?!\/)|https?:\/\/)\S*$/.test(loginUrl))) {
    throw new InvalidDashboardOptionsError(
      'loginUrl',
      `must be a path starting with "/" or an http(s) URL, got ${JSON.stringify(loginUrl)}.`,
    );
  }
  const title = options.title ?? 'Duraflow';
  if (typeof title !== 'string' || title.length === 0 || title.length > 100) {
    throw new InvalidDashboardOptionsError('title', 'must be a non-empty string of at most 100 characters.');
  }
  return {
    path,
    guards,
    imports,
    behindHostAuth: options.behindHostAuth ?? false,
    allowedHosts: allowedHosts(options.allowedHosts),
    loginUrl,
    pageSize: integer('pageSize', options.pageSize, DEFAULT_LIST_LIMIT, 1, MAX_LIST_LIMIT),
    previewChars: integer('previewChars', options.previewChars, 2048, 64, 1024 * 1024),
    liveIntervalMs: integer('liveIntervalMs', options.liveIntervalMs, 1000, 100, 60_000),
    title,
  };
}

function integer(option: string, value: number | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new InvalidDashboardOptionsError(option, `must be an integer from ${min} to ${max}, got ${String(value)}.`);
  }
  return value;
}

/** `name` or `name:port`; an IPv6 address in brackets. */
const HOST_PATTERN = /^([A-Za-z0-9]([A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]+\])(:\d{1,5})?$/;

function allowedHosts(hosts: string[] | undefined): string[] | undefined {
  if (hosts === undefined) return undefined;
  if (!Array.isArray(hosts) || hosts.length === 0 || hosts.some((host) => typeof host !== 'string' || !HOST_PATTERN.test(host))) {
    throw new InvalidDashboardOptionsError(
      'allowedHosts',
      `must be a non-empty array of host names, each with an optional port ("ops.example.com", "localhost:3000", "[::1]"), got ${JSON.stringify(hosts)}.`,
    );
  }
  return hosts.map((host) => host.toLowerCase());
}
