import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import { PATH_METADATA } from '@nestjs/common/constants';
import { DashboardLinks } from './dashboard-links';

/**
 * The dashboard's links for this request. The mount is read off the request's own path: the
 * handler's route has a known number of segments, and what comes before them is where the
 * dashboard is mounted (with the host's global prefix, or a RouterModule's path, in it). The
 * controller's path is the fallback.
 */
export const RequestLinks = createParamDecorator((_data: unknown, context: ExecutionContext): DashboardLinks => {
  const request = context.switchToHttp().getRequest<{ originalUrl?: string; url?: string }>();
  const route = String(Reflect.getMetadata(PATH_METADATA, context.getHandler()) ?? '');
  const fallback = String(Reflect.getMetadata(PATH_METADATA, context.getClass()) ?? '');
  return new DashboardLinks(mountOf(request.originalUrl ?? request.url ?? '', route) ?? fallback);
});

/** `/api/duraflow/tasks/abc` reached through route `tasks/:id` is mounted at `/api/duraflow`. */
export function mountOf(url: string, route: string): string | undefined {
  const segments = url.split(/[?#]/, 1)[0].split('/').filter(Boolean);
  const own = route.split('/').filter(Boolean).length;
  if (segments.length <= own) return undefined;
  return `/${segments.slice(0, segments.length - own).join('/')}`;
}
