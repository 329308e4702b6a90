import { BadRequestException, CanActivate, ExecutionContext, Injectable } from '@nestjs/common';

/**
 * Refuses a request whose path parameters, query or form hold a NUL character (`%00`), with a 400
 * page, before any handler reads the database: PostgreSQL cannot store NUL in text, and a
 * statement given one fails with the database's own message.
 */
@Injectable()
export class NulCharacterGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ params?: unknown; query?: unknown; body?: unknown }>();
    const where = [
      ['The address', request.params],
      ['The query string', request.query],
      ['The form', request.body],
    ].find(([, value]) => holdsNul(value, 0));
    if (where)
      throw new BadRequestException(
        `${String(where[0])} holds a NUL character (%00), which no task, step or filter can contain. Remove it and try again.`,
      );
    return true;
  }
}

/** Whether a string, or a string or name inside a parsed query or form, holds a NUL (a few levels deep: what parsers make). */
function holdsNul(value: unknown, depth: number): boolean {
  if (typeof value === 'string') return value.includes('\u0000');
  if (value === null || typeof value !== 'object' || depth > 8) return false;
  return Object.entries(value).some(([key, child]) => key.includes('\u0000') || holdsNul(child, depth + 1));
}
