import { Controller, Get, HttpStatus, Inject, Req, Res, ServiceUnavailableException } from '@nestjs/common';
import { HealthCheckResult, HealthCheckService, HealthIndicatorFunction, TypeOrmHealthIndicator } from '@nestjs/terminus';
import { DuraflowErrorResponse } from '@duraflow/nestjs';
import { ApiKeyGuard, Public } from '../auth/api-key.guard';
import { EngineConfig } from '../config/engine.config';
import { ENGINE_CONFIG } from '../config/engine-config.token';
import { RedisHealthIndicator } from './redis.health';

type Headers = { headers: Record<string, string | string[] | undefined> };
/** Each check's report: `{ database: { status: 'down', message: '…' } }`. */
type Indicators = Partial<HealthCheckResult['details']>;

/**
 * `GET /health`: the database, and Redis when REDIS_URL is set. Open even with an API key,
 * for load balancers; what went wrong (a backend's error text) is shown only to a caller that
 * sends the key. 200 with terminus's report when all is up; 503 in the API's error shape,
 * `details` holding each check's status, when one is down.
 */
@Controller('health')
export class HealthController {
  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    private readonly health: HealthCheckService,
    private readonly database: TypeOrmHealthIndicator,
    private readonly redis: RedisHealthIndicator,
    private readonly apiKey: ApiKeyGuard,
  ) {}

  @Get()
  @Public()
  async check(@Req() request: Headers, @Res({ passthrough: true }) response: { status(code: number): unknown }) {
    const checks: HealthIndicatorFunction[] = [() => this.database.pingCheck('database', { timeout: 2_000 })];
    if (this.config.redisUrl) checks.push(() => this.redis.pingCheck('redis'));
    const shown = (indicators: Indicators) => (this.apiKey.authenticated(request) ? indicators : statusesOnly(indicators));
    try {
      const result = await this.health.check(checks);
      return { ...result, info: shown(result.info ?? {}), details: shown(result.details) };
    } catch (error) {
      if (!(error instanceof ServiceUnavailableException)) throw error;
      const result = error.getResponse() as HealthCheckResult;
      const down = Object.keys(result.error ?? {});
      response.status(HttpStatus.SERVICE_UNAVAILABLE);
      const body: DuraflowErrorResponse = {
        statusCode: HttpStatus.SERVICE_UNAVAILABLE,
        code: 'UNHEALTHY',
        message: `Unhealthy: ${down.join(' and ')} ${down.length === 1 ? 'is' : 'are'} down.`,
        details: shown(result.details),
      };
      return body;
    }
  }
}

/** `{ database: { status: 'down', message: 'connect ECONNREFUSED …' } }` -> `{ database: { status: 'down' } }`. */
function statusesOnly(indicators: Indicators): Indicators {
  return Object.fromEntries(Object.entries(indicators).map(([key, value]) => [key, value && { status: value.status }]));
}
