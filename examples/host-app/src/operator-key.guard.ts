import { CanActivate, ExecutionContext, Injectable, UnauthorizedException } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { timingSafeEqual } from 'node:crypto';

/** The dashboard's guard in this example: the `x-operator-key` header must be OPERATOR_KEY (unset: nobody gets in). */
@Injectable()
export class OperatorKeyGuard implements CanActivate {
  constructor(private readonly config: ConfigService) {}

  canActivate(context: ExecutionContext): boolean {
    const expected = this.config.get<string>('OPERATOR_KEY');
    const given = context.switchToHttp().getRequest<{ headers: Record<string, unknown> }>().headers['x-operator-key'];
    const matches =
      typeof expected === 'string' &&
      expected.length > 0 &&
      typeof given === 'string' &&
      given.length === expected.length &&
      timingSafeEqual(Buffer.from(given), Buffer.from(expected));
    if (!matches) throw new UnauthorizedException('Send the operator key in the x-operator-key header.');
    return true;
  }
}
