import { CanActivate, ExecutionContext, Inject, Injectable, SetMetadata, UnauthorizedException } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { Metadata } from '@grpc/grpc-js';
import { createHash, timingSafeEqual } from 'node:crypto';
import { EngineConfig } from '../config/engine.config';
import { ENGINE_CONFIG } from '../config/engine-config.token';
import { DASHBOARD_SESSION_COOKIE, isDashboardPath, readCookie } from '../dashboard/dashboard-session';
import { DashboardSessions } from '../dashboard/dashboard-sessions';

const PUBLIC_ROUTE = 'duraflow:engine:public';

/** A route any caller may use, even with DURAFLOW_API_KEY set (the health check). */
export const Public = () => SetMetadata(PUBLIC_ROUTE, true);

/**
 * With DURAFLOW_API_KEY set, an HTTP call needs the key in `x-api-key` or
 * `Authorization: Bearer <key>` (else 401), a gRPC call in the metadata entry
 * `x-api-key` (else UNAUTHENTICATED). A browser on the dashboard (`/duraflow`) may instead
 * carry the cookie of a live session its sign-in form opened (DashboardSessions). Without a key,
 * every call passes.
 */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  private readonly expected: Buffer | undefined;
  /** A callback url's POST carries its own credential (the signed token in its path): no API key. */
  private readonly callbackPath: string | undefined;

  constructor(
    @Inject(ENGINE_CONFIG) config: EngineConfig,
    private readonly reflector: Reflector,
    private readonly sessions: DashboardSessions,
  ) {
    this.expected = config.apiKey === undefined ? undefined : digest(config.apiKey);
    this.callbackPath = config.callbacks ? `${config.callbacks.path}/` : undefined;
  }

  canActivate(context: ExecutionContext): boolean {
    if (!this.expected) return true;
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC_ROUTE, [context.getHandler(), context.getClass()])) return true;
    if (context.getType() === 'rpc') {
      const metadata = context.switchToRpc().getContext<Metadata>();
      if (this.matches(String(metadata.get('x-api-key')[0] ?? ''))) return true;
      // The gRPC filter answers it UNAUTHENTICATED.
      throw new UnauthorizedException('Missing or wrong API key: send it in the metadata entry "x-api-key".');
    }
    const request = context.switchToHttp().getRequest<{ headers: Record<string, string | string[] | undefined>; path?: string }>();
    if (this.authenticated(request)) return true;
    if (this.callbackPath && (request.path ?? '').startsWith(this.callbackPath)) return true;
    if (isDashboardPath(request.path)) {
      const cookie = request.headers.cookie;
      if (this.sessions.use(readCookie(Array.isArray(cookie) ? cookie[0] : cookie, DASHBOARD_SESSION_COOKIE))) return true;
      throw new UnauthorizedException("The dashboard needs the engine's API key: sign in with it (DURAFLOW_API_KEY).");
    }
    throw new UnauthorizedException('Missing or wrong API key: send it in the "x-api-key" header or as "Authorization: Bearer <key>".');
  }

  /** Whether an HTTP request carries the key (false when no key is set: nobody is authenticated then). */
  authenticated(request: { headers: Record<string, string | string[] | undefined> }): boolean {
    if (!this.expected) return false;
    const header = (name: string) => {
      const value = request.headers[name];
      return Array.isArray(value) ? value[0] : value;
    };
    const bearer = /^Bearer\s+(.+)$/i.exec(header('authorization') ?? '')?.[1];
    return this.matches(header('x-api-key') ?? bearer ?? '');
  }

  /** Compares digests, so the time taken says nothing about the key. */
  private matches(candidate: string): boolean {
    return timingSafeEqual(digest(candidate), this.expected!);
  }
}

/** Whether `candidate` is `secret`, in a time that says nothing about either. */
export function sameSecret(candidate: string, secret: string): boolean {
  return timingSafeEqual(digest(candidate), digest(secret));
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}
