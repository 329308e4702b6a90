import { CanActivate, ExecutionContext, Inject, Injectable, SetMetadata, UnauthorizedException } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { Metadata } from '@grpc/grpc-js';
import { createHash, timingSafeEqual } from 'node:crypto';
import { EngineConfig } from '../config/engine.config';
import { ENGINE_CONFIG } from '../config/engine-config.token';

const PUBLIC_ROUTE = 'duraflow:engine:public';

/** A route any caller may use, even with DURAFLOW_API_KEY set (the health check). */
export const Public = () => SetMetadata(PUBLIC_ROUTE, true);

/**
 * With DURAFLOW_API_KEY set, an HTTP call needs the key in `x-api-key` or
 * `Authorization: Bearer <key>` (else 401), a gRPC call in the metadata entry
 * `x-api-key` (else UNAUTHENTICATED). Without it, every call passes.
 */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  private readonly expected: Buffer | undefined;

  constructor(@Inject(ENGINE_CONFIG) config: EngineConfig, private readonly reflector: Reflector) {
    this.expected = config.apiKey === undefined ? undefined : digest(config.apiKey);
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
    if (this.authenticated(context.switchToHttp().getRequest())) return true;
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

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}
